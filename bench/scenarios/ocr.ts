/**
 * ocr: the OCR example's fan-out (examples/ocr/: PP-OCRv4 detection → one sub-item per text box →
 * angle classification → recognition → gathered lines) with the recogniser batching the boxes of
 * every request together, against the same server with the recogniser at batch 1, each box read
 * alone, as a server that cannot batch across a request's fan-out does at best. Reported in lines
 * read per second. The image, rendered once with sharp, holds LINES.length lines of text; the
 * probe checks both servers read every one exactly. Unpinned: four stages on two cores.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import sharp from "sharp";
import { RECOGNISE_BATCH } from "../../examples/ocr/ocr-pipeline.js";
import { cacheDir } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { report, rps, sweep, sweepOptions, sweepSettings, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";

export const defaults = { duration: 15, rounds: 3, warmup: 5 };

/** The image's lines of text, top to bottom. */
export const LINES = ["Invoice 2026-0412", "Total due 42.50", "Shoal serves models", "fan out and gather", "batched across requests", "thank you"];
const WIDTH = 400;
const LINE_STEP = 40;
const FONT_SIZE = 24;

/** Renders the image (a white PNG, one line per LINES entry) into bench/.cache unless it is there. */
async function renderImage(root: string): Promise<string> {
  const file = join(cacheDir(root), `ocr-lines-${LINES.length}-${WIDTH}.png`);
  if (existsSync(file)) return file;
  mkdirSync(cacheDir(root), { recursive: true });
  const height = LINE_STEP * LINES.length + 16;
  const texts = LINES.map((text, i) => `<text x="16" y="${36 + i * LINE_STEP}" font-family="sans-serif" font-size="${FONT_SIZE}" fill="black">${text}</text>`);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}"><rect width="100%" height="100%" fill="white"/>${texts.join("")}</svg>`;
  writeFileSync(file, await sharp(Buffer.from(svg)).png().toBuffer());
  return file;
}

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root } = ctx;
  ctx.values.connections ??= "4,16";
  const s = sweepSettings(ctx, "unpinned");
  const image = await renderImage(root);
  const probe = {
    path: "/ocr",
    body: readFileSync(image),
    contentType: "image/png",
    check: (t: string) => {
      const read = ((JSON.parse(t) as { lines?: { text: string }[] }).lines ?? []).map((l) => l.text);
      return JSON.stringify(read) === JSON.stringify(LINES) ? undefined : `expected ${JSON.stringify(LINES)}, read ${JSON.stringify(read)}`;
    },
  };
  // Generous deadlines, the server's and wrk's: at 16 connections a request waits behind many
  // boxes on two cores, seconds when the recogniser reads them one by one.
  const server = (recogniseBatch: number) => ({
    script: "bench/servers/shoal-ocr.ts",
    args: ["--recognise-batch", String(recogniseBatch), "--timeout", "60000", "--port", "{port}", "--grpc-port", "0", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
    probe,
    startTimeoutMs: 120_000,
  });
  const common = { path: "/ocr", body: "", lua: join("bench", "lua", "post-file.lua"), wrkEnv: { WRK_BODY_FILE: image, WRK_CONTENT_TYPE: "image/png" }, wrkTimeoutSec: 60, batchMetric: "shoal_stage_batch_size", batchLabel: 'stage="Recognise', shoal: true };
  const contenders: Contender[] = [
    { name: "fan-out", config: `bench/servers/shoal-ocr.ts: the OCR example as it is, the recogniser batching up to ${RECOGNISE_BATCH} boxes of any requests (5 ms wait)`, spec: server(RECOGNISE_BATCH), ...common },
    { name: "per-box", config: "bench/servers/shoal-ocr.ts --recognise-batch 1: the same stages, each box recognised alone", spec: server(1), ...common },
  ];
  const result = await sweep(ctx, "ocr", `ocr: PP-OCRv4 on an image of ${LINES.length} lines, fan-out batching against each box alone`, contenders, s);
  const at = s.connections.includes(16) ? 16 : Math.max(...s.connections);
  const linesPerSec = (server: string, connections: number) => rps(result, server, connections) * LINES.length;
  result.extra = { image: relative(root, image), lines: LINES, linesPerSec: Object.fromEntries(result.cells.map((c) => [`${c.server}@${c.connections}`, c.requestsPerSec.median * LINES.length])) };
  result.headline = [{ what: `fan-out / per-box lines/s at ${at} connections`, value: linesPerSec("fan-out", at) / linesPerSec("per-box", at), goal: 1, unit: "x" }];
  const rows = result.cells.map((c) => `| ${c.server} | ${c.connections} | ${Math.round(c.requestsPerSec.median * LINES.length).toLocaleString("en-US")} | ${c.meanBatch === undefined ? "" : c.meanBatch.toFixed(1)} |`);
  report(ctx, result, [
    "## Lines per second",
    "",
    `Every request is ${relative(root, image)} (${LINES.length} lines of text, each read back exactly by both servers at start), so lines/s is req/s × ${LINES.length}; the mean batch is the recogniser's.`,
    "",
    "| server | conns | lines/s (median) | recogniser's mean batch |",
    "|---|--:|--:|--:|",
    ...rows,
    "",
  ]);
}

export const scenario: Scenario = {
  name: "ocr",
  summary: "OCR (PP-OCRv4, the example's four stages): text boxes of all requests batched in the recogniser (fan-out) against each box recognised alone, in lines/s.",
  options: sweepOptions.options,
  help: { ...sweepOptions.help, "connections <list>": "concurrencies to sweep, comma-separated (default 4,16)" },
  run,
};
