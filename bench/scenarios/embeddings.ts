/**
 * embeddings: all-MiniLM-L6-v2 (npm run models -- minilm) on `POST /v1/embeddings`, one text a
 * request, texts of mixed lengths (6 to 200 words; `--mix short`: 4 to 16), swept over concurrency: Shoal
 * (examples/embeddings/server.ts: 2 workers × 1 intra-op thread, batches of up to 32 requests,
 * 5 ms wait, each batch's texts run in groups of similar length) against a plain node:http server
 * calling the same model, tokenizer and pooling once per request with 2 intra-op threads (both
 * cores). Texts/s is requests/s.
 *
 * Unpinned: both servers need both cores; wrk is light next to the model.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { cacheDir } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { peakRps, report, rps, sweep, sweepOptions, sweepSettings, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";
import { ensureModel } from "../../scripts/models/ensure-model.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

const MODEL = "all-MiniLM-L6-v2";
const WORDS = "the a model serves many clients at once while batching their texts into one run of the network so that each core stays busy and nobody waits long for an answer fish swim in shoals near the warm coast every spring".split(" ");
/** Words per text, by `--mix`: `mixed` (default) mostly sentences, some paragraphs, one long text; `short` sentences only (queries, titles). */
export const MIXES = {
  mixed: [6, 10, 14, 20, 8, 30, 12, 50, 7, 16, 80, 9, 24, 120, 11, 200],
  short: [4, 6, 8, 5, 10, 7, 12, 9, 6, 14, 5, 8, 11, 7, 16, 9],
} as const;

/** The texts the load sends, in turn: `lengths[i]` words each. */
export function texts(lengths: readonly number[] = MIXES.mixed): string[] {
  return lengths.map((n, i) => Array.from({ length: n }, (_, j) => WORDS[(i * 7 + j * 3) % WORDS.length]).join(" "));
}

const check = (t: string) => {
  const d = (JSON.parse(t) as { data?: { embedding?: unknown[] }[] }).data;
  return d?.[0]?.embedding?.length === 384 ? undefined : `expected one 384-value embedding, got ${t.slice(0, 80)}`;
};

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const s = sweepSettings(ctx, "unpinned");
  const mixName = (ctx.values.mix as string | undefined) ?? "mixed";
  const lengths = MIXES[mixName as keyof typeof MIXES];
  if (lengths === undefined) throw new Error(`--mix must be ${Object.keys(MIXES).join(" or ")}, not '${mixName}'`);
  const made = await ensureModel("minilm");
  if (made.built) ctx.log(`made the minilm model in ${made.dir}`);
  const bodies = texts(lengths).map((input) => JSON.stringify({ model: MODEL, input, encoding_format: "float" }));
  const bodiesFile = join(cacheDir(ctx.root), `embeddings-${mixName}.jsonl`);
  mkdirSync(cacheDir(ctx.root), { recursive: true });
  writeFileSync(bodiesFile, `${bodies.join("\n")}\n`);
  const probe = { path: "/v1/embeddings", body: bodies[0]!, check };
  const load = { path: "/v1/embeddings", body: "", lua: join("bench", "lua", "post-bodies.lua"), wrkEnv: { WRK_BODIES_FILE: bodiesFile } };
  const words = `${Math.min(...lengths)} to ${Math.max(...lengths)} words`;
  const mix = `${lengths.length} texts of ${words} in turn (${relative(ctx.root, bodiesFile)})`;
  const contenders: Contender[] = [
    {
      name: "shoal",
      shoal: true,
      config: `examples/embeddings/server.ts: /v1/embeddings, 2 workers × 1 intra-op thread, max batch 32, wait 5 ms, each batch's texts in runs of similar length; ${mix}`,
      spec: { script: "examples/embeddings/server.ts", args: ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], probe, startTimeoutMs: 120_000 },
      ...load,
      batchMetric: "shoal_stage_batch_size",
    },
    {
      name: "plain",
      config: `bench/servers/plain-embeddings.ts: node:http calling the same model, tokenizer and pooling once per request (no batching), one session with 2 intra-op threads (both cores); ${mix}`,
      spec: { script: "bench/servers/plain-embeddings.ts", args: ["--port", "{port}", "--address", "127.0.0.1", "--intra-op-threads", "2"], probe, startTimeoutMs: 60_000 },
      ...load,
    },
  ];
  const result = await sweep(ctx, "embeddings", `embeddings: all-MiniLM-L6-v2 on /v1/embeddings, one text of ${words} a request`, contenders, s);
  const at = s.connections.includes(64) ? 64 : Math.max(...s.connections);
  result.headline = [
    { what: `Shoal / plain node:http texts/s at ${at} connections`, value: rps(result, "shoal", at) / rps(result, "plain", at), goal: 3, unit: "x" },
    { what: "Shoal / plain node:http peak texts/s", value: peakRps(result, "shoal") / peakRps(result, "plain"), goal: 3, unit: "x" },
  ];
  report(ctx, result);
}

export const scenario: Scenario = {
  name: "embeddings",
  summary: "all-MiniLM-L6-v2 on /v1/embeddings, texts of mixed lengths: Shoal's batching against a plain node:http server calling the model per request.",
  options: { ...sweepOptions.options, mix: { type: "string" } },
  help: { ...sweepOptions.help, "mix <name>": "the texts: mixed (6 to 200 words, default) or short (4 to 16 words)" },
  run,
};
