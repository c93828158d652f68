/**
 * model: one compute-bound ONNX model (a generated 1024→4096→4096→1000 MLP, ~100 MB) served with
 * batching by Shoal (`shoal serve`), Mosec and MLServer with the same settings — 2 workers with one
 * session of 1 intra-op thread each, batches of up to 32 rows, 5 ms wait — against a plain
 * node:http server running it per request, against the upper limit (the model run in-process at
 * batch 32 by 2 sessions × 1 thread), and beside the least a batching server can do. Shoal and
 * that bare server run on Node and, when Bun is installed (bench/lib/runtimes.ts), on Bun too.
 *
 * Unpinned: the servers need both cores for their 2 workers; wrk is light next to the model.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { pack } from "msgpackr";
import { pinned } from "../lib/machine.js";
import { cacheDir, ensureMlp, ensurePeers, mlserverSpec, mosecSpec } from "../lib/peers.js";
import { findBun, onBun } from "../lib/runtimes.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { spread } from "../lib/stats.js";
import { peakRps, report, rps, sweep, sweepOptions, sweepSettings, wantsPeers, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

/** The model's sizes: `big` is the benchmark's, `tiny` keeps the smoke test fast. */
const MODELS = {
  big: { inputs: 1024, hidden: 4096, layers: 2, outputs: 1000 },
  tiny: { inputs: 64, hidden: 128, layers: 1, outputs: 10 },
} as const;
const WORKERS = 2;
const THREADS = 1;
const MAX_BATCH = 32;
const MAX_WAIT_MS = 5;

/** One request's row: short decimals, so that JSON size does not dominate. */
export const row = (width: number) => Array.from({ length: width }, (_, i) => ((i * 7) % 10) / 10);

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root, log, common } = ctx;
  const s = sweepSettings(ctx, "unpinned");
  const size = ((ctx.values.model as string | undefined) ?? "big") as keyof typeof MODELS;
  const shape = MODELS[size];
  if (shape === undefined) throw new Error(`--model must be big or tiny, not '${size}'`);
  if (wantsPeers(s, ["mosec", "mlserver"])) ensurePeers(root, log);
  const model = relative(root, ensureMlp(root, `mlp-${size}`, shape, log));
  const input = row(shape.inputs);
  const body = JSON.stringify({ input: [input] });
  const v2 = JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, shape.inputs], data: input }] });
  const outputs = (rows: unknown) => (Array.isArray(rows) && Array.isArray(rows[0]) && rows[0].length === shape.outputs ? undefined : `expected ${shape.outputs} outputs, got ${JSON.stringify(rows).slice(0, 80)}`);
  const probe = { path: "/inference", body, check: (t: string) => outputs((JSON.parse(t) as { output?: unknown }).output) };
  const peerEnv = { BENCH_MODEL: model, BENCH_NUM: String(WORKERS), BENCH_MAX_BATCH: String(MAX_BATCH), BENCH_MAX_WAIT_MS: String(MAX_WAIT_MS), BENCH_INTRA_OP_THREADS: String(THREADS) };
  const batching = `${WORKERS} workers × ${THREADS} intra-op thread, max batch ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms`;
  // Shoal's binary alternative: the same row as raw little-endian float32 bytes in MessagePack,
  // and the answer's rows likewise.
  const binaryFile = join(cacheDir(root), `model-${size}-request.msgpack`);
  writeFileSync(binaryFile, pack({ input: { data: new Uint8Array(Float32Array.from(input).buffer), shape: [1, shape.inputs], type: "float32" } }));
  const shoalSpec = {
    script: "dist/cli/main.js",
    args: ["serve", model, "--num", String(WORKERS), "--intra-op-threads", String(THREADS), "--max-batch-size", String(MAX_BATCH), "--max-wait-ms", String(MAX_WAIT_MS), "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
    probe,
    startTimeoutMs: 120_000,
  };
  const shoal: Contender = {
    name: "shoal",
    shoal: true,
    config: `\`shoal serve ${model}\` (shoal/onnx), ${batching}; JSON in and out, like the peers`,
    spec: shoalSpec,
    path: "/inference",
    body,
    batchMetric: "shoal_stage_batch_size",
  };
  const shoalMp: Contender = {
    name: "shoal-mp",
    shoal: true,
    config: `the same Shoal server, with its binary alternative: \`application/msgpack\` bodies carrying the rows as raw float32 bytes (${relative(root, binaryFile)}), answers likewise`,
    spec: shoalSpec,
    path: "/inference",
    body: "",
    lua: join("bench", "lua", "post-file.lua"),
    wrkEnv: { WRK_BODY_FILE: binaryFile, WRK_CONTENT_TYPE: "application/msgpack" },
    batchMetric: "shoal_stage_batch_size",
  };
  const bare: Contender = {
    name: "bare",
    config: `bench/servers/bare-batched.mjs: the least a batching Node server does, for reference: node:http, a queue, and ${WORKERS} worker threads with a session of ${THREADS} intra-op thread each, batches of up to ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms; no validation, metrics or deadlines; the same MessagePack bodies as shoal-mp`,
    spec: {
      script: "bench/servers/bare-batched.mjs",
      args: ["--model", model, "--port", "{port}", "--address", "127.0.0.1", "--batch", String(MAX_BATCH), "--sessions", String(WORKERS), "--threads", String(THREADS), "--max-wait-ms", String(MAX_WAIT_MS)],
      probe: { path: "/", body: "", status: 404 },
      startTimeoutMs: 60_000,
    },
    path: "/inference",
    body: "",
    lua: join("bench", "lua", "post-file.lua"),
    wrkEnv: { WRK_BODY_FILE: binaryFile, WRK_CONTENT_TYPE: "application/msgpack" },
  };
  const bun = findBun(root);
  const contenders: Contender[] = [
    shoal,
    onBun(shoal, bun, `the same \`shoal serve\` run by Bun (\`bun dist/cli/main.js serve ...\`), ${batching}; JSON in and out`),
    shoalMp,
    onBun(shoalMp, bun, "Shoal on Bun with the MessagePack bodies of shoal-mp"),
    bare,
    onBun(bare, bun, "bench/servers/bare-batched.mjs run by Bun: the same queue, batching, worker threads and MessagePack bodies as bare, behind `Bun.serve`; Bun's ceiling"),
    {
      name: "mosec",
      config: `bench/peers/mosec_model.py: a batching Worker with onnxruntime, ${batching} (Mosec's default JSON serialize)`,
      spec: mosecSpec(root, "mosec_model.py", peerEnv, probe),
      path: "/inference",
      body,
      batchMetric: "mosec_service_batch_size",
    },
    {
      name: "mlserver",
      config: `bench/peers/mlserver_model/: a custom runtime with onnxruntime, adaptive batching (max_batch_size ${MAX_BATCH}, max_batch_time ${MAX_WAIT_MS / 1000} s), parallel_workers ${WORKERS}, ${THREADS} intra-op thread`,
      spec: mlserverSpec(root, join("bench", "peers", "mlserver_model"), peerEnv, {
        path: "/v2/models/mlp/infer",
        body: v2,
        check: (t) => {
          const out = (JSON.parse(t) as { outputs?: { data?: number[] }[] }).outputs?.[0]?.data;
          return out?.length === shape.outputs ? undefined : `expected ${shape.outputs} outputs, got ${t.slice(0, 80)}`;
        },
      }),
      path: "/v2/models/mlp/infer",
      body: v2,
    },
    {
      name: "plain",
      config: "bench/servers/plain-onnx.ts: node:http running the model inline per request (no batching), one session with 2 intra-op threads (both cores)",
      spec: { script: "bench/servers/plain-onnx.ts", args: ["--model", model, "--port", "{port}", "--address", "127.0.0.1", "--intra-op-threads", "2"], probe, startTimeoutMs: 60_000 },
      path: "/inference",
      body,
    },
  ];
  // The in-process limit, measured at the start of every round (servers idle, machine quiet), so
  // that it sees the same machine as the servers' figures it is compared with.
  const limitRuns: number[] = [];
  const measureLimit = async (round: number) => {
    const args = ["bench/servers/onnx-limit.mjs", "--model", model, "--batch", String(MAX_BATCH), "--sessions", String(WORKERS), "--threads", String(THREADS), "--seconds", String(common.durationSec)];
    const [file, argv] = pinned(s.layout.server, process.execPath, args);
    const r = spawnSync(file, argv, { cwd: root, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`onnx-limit failed: ${r.stderr}`);
    limitRuns.push((JSON.parse(r.stdout) as { samplesPerSec: number }).samplesPerSec);
    log(`  round ${round} in-process limit: ${Math.round(limitRuns.at(-1)!)} samples/s (batch ${MAX_BATCH}, ${WORKERS} sessions × ${THREADS} thread)`);
  };
  const result = await sweep(ctx, "model", `model: a ${shape.inputs}→${shape.hidden}×${shape.layers}→${shape.outputs} MLP (ONNX), batched`, contenders, s, { eachRound: measureLimit });

  const limit = spread(limitRuns);
  result.extra = { ...result.extra, inProcessLimit: { samplesPerSec: limit, runs: limitRuns, batch: MAX_BATCH, sessions: WORKERS, threads: THREADS } };
  const shoalPeak = peakRps(result, "shoal");
  const of = (server: string, connections?: number) => (connections === undefined ? peakRps(result, server) : rps(result, server, connections)) / limit.median;
  result.headline = [
    { what: "Shoal (JSON) req/s at 64 connections / in-process limit (samples/s)", value: of("shoal", 64), goal: 0.85, unit: "%" },
    { what: "Shoal (MessagePack, raw float32) req/s at 64 connections / in-process limit", value: of("shoal-mp", 64), goal: 0.85, unit: "%" },
    { what: "Shoal (JSON) peak req/s / in-process limit", value: of("shoal"), goal: 0.85, unit: "%" },
    { what: "Shoal (MessagePack) peak req/s / in-process limit", value: of("shoal-mp"), goal: 0.85, unit: "%" },
    { what: "Shoal on Bun (JSON) req/s at 64 connections / in-process limit", value: of("shoal-bun", 64), goal: 0.85, unit: "%" },
    { what: "Shoal on Bun (MessagePack) req/s at 64 connections / in-process limit", value: of("shoal-mp-bun", 64), goal: 0.9, unit: "%" },
    { what: "Shoal on Bun / bare Bun.serve server req/s at 64 connections (MessagePack)", value: rps(result, "shoal-mp-bun", 64) / rps(result, "bare-bun", 64), goal: 0.9, unit: "x" },
    { what: "Shoal / Mosec peak req/s", value: shoalPeak / peakRps(result, "mosec"), goal: 1, unit: "x" },
    { what: "Shoal / MLServer peak req/s", value: shoalPeak / peakRps(result, "mlserver"), goal: 1, unit: "x" },
    { what: "Shoal / plain node:http peak req/s", value: shoalPeak / peakRps(result, "plain"), goal: 5, unit: "x" },
  ];
  const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : "n/a");
  const bareRows = (bare: string, shoalMp: string, front: string) =>
    Number.isFinite(peakRps(result, bare))
      ? [
          `The bare batching server on ${front} (\`${bare}\`, MessagePack only) shows what is left on this machine once HTTP, the kernel's TCP and wrk have had their share of the same cores: ` +
            `${pct(of(bare, 64))} of the limit at 64 connections and ${pct(of(bare))} at its peak. ` +
            `Shoal (\`${shoalMp}\`) with the same bodies reaches ${pct(rps(result, shoalMp, 64) / rps(result, bare, 64))} of the bare server at 64 connections and ${pct(peakRps(result, shoalMp) / peakRps(result, bare))} at the peak.`,
          "",
        ]
      : [];
  report(ctx, result, [
    "## In-process limit",
    "",
    `\`bench/servers/onnx-limit.mjs\`: the same model at batch ${MAX_BATCH}, ${WORKERS} sessions (worker threads) × ${THREADS} intra-op thread, back to back, no HTTP or JSON, measured at the start of each round with the servers idle: ` +
      `**${Math.round(limit.median).toLocaleString("en-US")} samples/s** (median of ${limit.n}; ${Math.round(limit.min).toLocaleString("en-US")}–${Math.round(limit.max).toLocaleString("en-US")}).`,
    "",
    ...bareRows("bare", "shoal-mp", "node:http"),
    ...bareRows("bare-bun", "shoal-mp-bun", "Bun.serve"),
  ]);
}

export const scenario: Scenario = {
  name: "model",
  summary: "A compute-bound ONNX MLP with batching: Shoal (on Node and Bun), Mosec, MLServer, plain node:http per request, a bare batching server (node:http and Bun.serve), and the in-process limit.",
  options: { ...sweepOptions.options, model: { type: "string" } },
  help: { ...sweepOptions.help, "model <size>": "big (1024→4096→4096→1000, ~100 MB, default) or tiny (64→128→10, for a quick check)" },
  run,
};
