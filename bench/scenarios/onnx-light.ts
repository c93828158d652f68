/**
 * ONNX light-model benchmark: a 256→1024→1024→10 MLP (1.3 M parameters, 0.1 ms a row) served by
 * `shoal serve model.onnx` (batching on: up to 32 requests, 5 ms) against a plain node:http
 * server that runs the model inline, one request per run, with onnxruntime-node.
 *
 * After a warm-up, wrk alternates between them for N rounds at C connections; medians over
 * rounds. For each Shoal point the mean batch it formed is read from /metrics
 * (shoal_stage_batch_size_sum / _count over the point).
 */
import os from "node:os";
import { relative } from "node:path";
import { gitState, machineBusy, machineInfo, type MachineInfo } from "../lib/machine.js";
import { alternate, describePoint, measureOnce, measurePoint, quietHelp, quietOptions, quietSettings, summarise, SUMMARY_ALIGN, SUMMARY_HEADERS, summaryCells, wholeNumber, type Measured, type QuietSettings, type Summary } from "../lib/measure.js";
import { metricValue, scrape } from "../../src/bench/prometheus-text.js";
import { ensureMlp, nodeVersions } from "../lib/peers.js";
import { markdownTable, textTable, writeResults, targetsAndCommands, reportHeader } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { spread, type Spread } from "../lib/stats.js";
import { requireWrk, wrkVersion, type WrkOptions } from "../lib/wrk.js";
import { row } from "./model.js";

/** Sized so that the default run takes about 2 minutes. */
export const defaults = { duration: 10, rounds: 3, warmup: 3 };

const SHAPE = { inputs: 256, hidden: 1024, layers: 2, outputs: 10 };
const MODEL = "mlp-256-1024-1024-10";
const BODY = JSON.stringify({ input: [row(SHAPE.inputs)] });
const SERVERS = ["shoal", "plain"] as const;
type ServerName = (typeof SERVERS)[number];

interface Point extends Measured {
  server: ServerName;
  round: number;
  /** Mean batch Shoal formed during the point. */
  meanBatch?: number;
}

interface OnnxLightData {
  scenario: "onnx-light";
  date: string;
  invocation: string;
  machine: MachineInfo;
  versions: Record<string, string>;
  git: { commit: string; srcDirty: boolean };
  busyAtStart: number;
  settings: QuietSettings & { model: string; connections: number; rounds: number; durationSec: number; warmupSec: number };
  commands: Record<string, string[]>;
  summary: Record<ServerName, Summary> & { meanBatch: Spread; ratio: number; ratioPerRound: number[] };
  targets: { ratio: number };
  points: Point[];
  discarded: Point[];
}

async function batchTotals(server: RunningServer): Promise<{ sum: number; count: number }> {
  const text = await scrape(server.url);
  return { sum: metricValue(text, "shoal_stage_batch_size_sum"), count: metricValue(text, "shoal_stage_batch_size_count") };
}

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { common, values, root, log } = ctx;
  const connections = wholeNumber("--connections", values.connections as string | undefined, 64);
  const quiet = quietSettings(values);
  const machine = machineInfo(wrkVersion());
  const git = gitState(root);
  const model = relative(root, ensureMlp(root, MODEL, SHAPE, log));
  log(`onnx-light: ${model} on shoal serve (batching) vs node:http inline, ${connections} connections, ${common.rounds} rounds of ${common.durationSec} s`);
  const busyAtStart = Math.round((await machineBusy(1000)) * 100) / 100;
  log(`other processes are using ${busyAtStart} cores`);
  const probe = { path: "/inference", body: BODY };
  const servers = {} as Record<ServerName, RunningServer>;
  const commands: Record<string, string[]> = {};
  const points: Point[] = [];
  const discarded: Point[] = [];
  try {
    servers.shoal = await startServer({
      name: "shoal",
      script: "dist/cli/main.js",
      args: ["serve", model, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
      port: await freePort(),
      cwd: root,
      probe,
      startTimeoutMs: 60_000,
    });
    // As many intra-op threads as Shoal gives its one worker: all the cores.
    const threads = String(os.availableParallelism());
    servers.plain = await startServer({
      name: "plain",
      script: "bench/servers/plain-onnx.ts",
      args: ["--model", model, "--intra-op-threads", threads, "--port", "{port}", "--address", "127.0.0.1"],
      port: await freePort(),
      cwd: root,
      probe,
      startTimeoutMs: 60_000,
    });
    commands.shoal = [`${servers.shoal.command}   # = npx shoal serve ${model} ... (defaults: --num 1, --max-batch-size 32, --max-wait-ms 5)`];
    commands.plain = [servers.plain.command];
    const wrkOptions = (server: ServerName, seconds: number): WrkOptions => ({
      url: `${servers[server].url}/inference`,
      connections,
      durationSec: seconds,
      script: "bench/lua/post-json.lua",
      cwd: root,
      env: { WRK_BODY: BODY },
    });
    for (const server of SERVERS) {
      log(`  warm-up ${server} (${common.warmupSec} s)`);
      const warm = await measureOnce(servers[server].pid, wrkOptions(server, common.warmupSec));
      if (warm.non2xx > 0) throw new Error(`${warm.non2xx} non-2xx answers during the warm-up of ${server}`);
    }
    for (let round = 1; round <= common.rounds; round++) {
      for (const server of alternate(SERVERS, round)) {
        const label = `round ${round} ${server.padEnd(5)}`;
        const before = server === "shoal" ? await batchTotals(servers.shoal) : undefined;
        const m = await measurePoint(servers[server].pid, wrkOptions(server, common.durationSec), quiet, log, label);
        const after = before === undefined ? undefined : await batchTotals(servers.shoal);
        // The batches of discarded attempts are in the difference too; they ran under the same load.
        const meanBatch = before === undefined || after === undefined ? undefined : (after.sum - before.sum) / (after.count - before.count);
        points.push({ server, round, ...m.point, ...(meanBatch === undefined ? {} : { meanBatch }) });
        discarded.push(...m.discarded.map((d) => ({ server, round, ...d })));
        commands[`wrk c=${connections}`] ??= [`WRK_BODY='${BODY.slice(0, 40)}...' ${m.point.wrkCommand}`];
        log(describePoint(label, m.point) + (meanBatch === undefined ? "" : `  mean batch ${meanBatch.toFixed(1)}`));
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.stop();
  }

  const shoal = summarise(points.filter((p) => p.server === "shoal"));
  const plain = summarise(points.filter((p) => p.server === "plain"));
  const rounds = [...new Set(points.map((p) => p.round))];
  const at = (server: ServerName, round: number) => points.find((p) => p.server === server && p.round === round)?.requestsPerSec ?? NaN;
  const data: OnnxLightData = {
    scenario: "onnx-light",
    date: new Date().toISOString(),
    invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`,
    machine,
    versions: nodeVersions(root),
    git,
    busyAtStart,
    settings: { ...quiet, model, connections, rounds: common.rounds, durationSec: common.durationSec, warmupSec: common.warmupSec },
    commands,
    summary: {
      shoal,
      plain,
      meanBatch: spread(points.flatMap((p) => (p.meanBatch === undefined ? [] : [p.meanBatch]))),
      ratio: shoal.requestsPerSec.median / plain.requestsPerSec.median,
      ratioPerRound: rounds.map((r) => Math.round((at("shoal", r) / at("plain", r)) * 100) / 100),
    },
    targets: { ratio: 0.5 },
    points,
    discarded,
  };
  const written = writeResults(ctx.resultsDir, "onnx-light", data, markdown(data));
  process.stdout.write("\n" + headline(data) + "\n\n");
  process.stdout.write(`results: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}\n`);
}

const HEADERS = ["server", ...SUMMARY_HEADERS, "mean batch"];
const ALIGN = ["l", ...SUMMARY_ALIGN, "r"] as const;

function rows(data: OnnxLightData): string[][] {
  return SERVERS.map((s) => [s, ...summaryCells(data.summary[s]), s === "shoal" ? data.summary.meanBatch.median.toFixed(1) : "1"]);
}

function verdicts(data: OnnxLightData): string[] {
  const s = data.summary;
  return [
    `Shoal/plain at ${data.settings.connections} connections = ${s.ratio.toFixed(2)} (per round ${s.ratioPerRound.map((x) => x.toFixed(2)).join(", ")}; target >= ${data.targets.ratio}: ${s.ratio >= data.targets.ratio ? "met" : "NOT met"}); ` +
      `mean batch ${s.meanBatch.median.toFixed(1)} (${s.meanBatch.min.toFixed(1)}–${s.meanBatch.max.toFixed(1)})`,
  ];
}

function headline(data: OnnxLightData): string {
  return [textTable(HEADERS, rows(data), ALIGN), "", ...verdicts(data)].join("\n");
}

function markdown(data: OnnxLightData): string {
  const { settings: s } = data;
  return [
    ...reportHeader("ONNX light model: shoal serve (batching) vs node:http inline", data, `; onnxruntime-node ${data.versions["onnxruntime-node"]}`),
    `- Model: ${s.model} (${SHAPE.inputs}→${SHAPE.hidden}→${SHAPE.hidden}→${SHAPE.outputs} MLP, random weights); one row per request`,
    `- Load: wrk, 1 thread, POST /inference, ${s.connections} connections, ${s.rounds} rounds of ${s.durationSec} s after a ${s.warmupSec} s warm-up each, servers alternating; medians over rounds; unpinned`,
    "",
    "## Results",
    "",
    markdownTable(HEADERS, rows(data), ALIGN),
    "",
    "- **mean batch**: shoal_stage_batch_size_sum / _count over each Shoal point (median over rounds).",
    "",
    ...targetsAndCommands(verdicts(data), data.commands),
  ].join("\n");
}

export const scenario: Scenario = {
  name: "onnx-light",
  summary: "The 256→1024→1024→10 MLP on shoal serve (batching) vs inline onnxruntime-node in node:http: req/s, p50/p99, mean batch.",
  options: { connections: { type: "string" }, ...quietOptions },
  help: { "connections <n>": "wrk connections (default 64)", ...quietHelp },
  run,
};
