/**
 * python: the same Python forward() (a NumPy MLP sized like the model scenario's, batched) behind
 * Mosec and behind Shoal. One script, bench/peers/python_mlp.py, serves both: with Mosec's own
 * `from mosec import ...`, and with `from shoal.mosec import ...` (BENCH_FRONT=shoal), which starts
 * Shoal's front with the stage as Python process workers. And the same MLP as an MLServer runtime
 * (bench/peers/mlserver_mlp, an MLModel) behind MLServer 1.7 and behind Shoal's shared pool (its
 * Python workers, with the mlserver package's types). 2 workers, batches of up to 32, 5 ms wait,
 * one BLAS thread each, JSON in and out.
 *
 * Unpinned: the workers need both cores; wrk is light next to the model.
 */
import { join } from "node:path";
import { ensurePeers, ensureShoalSdk, mlserverSpec, mosecSpec, venvBin } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { p99, report, rps, sweep, sweepOptions, sweepSettings, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";
import { row } from "./model.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

const LAYERS = { big: [1024, 4096, 4096, 1000], tiny: [64, 128, 10] } as const;
const WORKERS = 2;
const MAX_BATCH = 32;
const MAX_WAIT_MS = 5;

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root, log } = ctx;
  const s = sweepSettings(ctx, "unpinned");
  const size = ((ctx.values.model as string | undefined) ?? "big") as keyof typeof LAYERS;
  const layers = LAYERS[size];
  if (layers === undefined) throw new Error(`--model must be big or tiny, not '${size}'`);
  ensurePeers(root, log);
  ensureShoalSdk(root, log);
  const body = JSON.stringify({ input: row(layers[0]) });
  const outputs = layers.at(-1)!;
  const probe = { path: "/inference", body, check: (t: string) => ((JSON.parse(t) as { output?: unknown[] }).output?.length === outputs ? undefined : `expected ${outputs} outputs, got ${t.slice(0, 80)}`) };
  const env = {
    BENCH_LAYERS: layers.join(","),
    BENCH_NUM: String(WORKERS),
    BENCH_MAX_BATCH: String(MAX_BATCH),
    BENCH_MAX_WAIT_MS: String(MAX_WAIT_MS),
    OPENBLAS_NUM_THREADS: "1",
    MKL_NUM_THREADS: "1",
  };
  const batching = `${WORKERS} worker processes × 1 BLAS thread, max batch ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms`;
  const mosec = mosecSpec(root, "python_mlp.py", env, probe);
  const contenders: Contender[] = [
    {
      name: "shoal",
      config: `bench/peers/python_mlp.py with \`from shoal.mosec import ...\` (BENCH_FRONT=shoal): Shoal's front (\`shoal python\`) and the Mlp Worker in Python process workers, ${batching}`,
      spec: { ...mosec, env: { ...mosec.env, BENCH_FRONT: "shoal", SHOAL_CLI: join(root, "dist", "cli", "main.js"), SHOAL_NODE: process.execPath } },
      path: "/inference",
      body,
      batchMetric: "shoal_stage_batch_size",
    },
    {
      name: "mosec",
      config: `bench/peers/python_mlp.py with \`from mosec import ...\`: Mosec's Rust front and the same Worker, ${batching}`,
      spec: mosec,
      path: "/inference",
      body,
      batchMetric: "mosec_service_batch_size",
    },
  ];
  // The same MLP as an MLServer runtime (an MLModel), behind MLServer and behind Shoal's shared pool.
  const repo = join("bench", "peers", "mlserver_mlp");
  const v2Body = JSON.stringify({ inputs: [{ name: "input-0", datatype: "FP32", shape: [1, layers[0]], data: row(layers[0]) }] });
  const v2Probe = { path: "/v2/models/mlp/infer", body: v2Body, check: (t: string) => ((JSON.parse(t) as { outputs?: { data?: unknown[] }[] }).outputs?.[0]?.data?.length === outputs ? undefined : `expected ${outputs} outputs, got ${t.slice(0, 80)}`) };
  const mlserverBatching = `${WORKERS} Python worker processes × 1 BLAS thread (settings.json's parallel_workers), adaptive batching ${MAX_BATCH} / ${MAX_WAIT_MS} ms`;
  contenders.push(
    {
      name: "shoal-mlserver",
      config: `\`shoal serve --model-repository ${repo}\`: the MLModel of ${repo}/mlp_runtime.py on the shared pool's Python workers, with the mlserver package's types, ${mlserverBatching}`,
      spec: { script: "dist/cli/main.js", args: ["serve", "--model-repository", repo, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], env: { ...env, SHOAL_PYTHON: venvBin(root, "python"), PYTHONPATH: join(root, "python"), SHOAL_GRPC_PORT: "{free}" }, probe: v2Probe, startTimeoutMs: 120_000 },
      path: "/v2/models/mlp/infer",
      body: v2Body,
      batchMetric: "shoal_stage_batch_size",
      batchLabel: 'model="mlp"',
    },
    {
      name: "mlserver",
      config: `\`mlserver start ${repo}\`: the same MLModel, ${mlserverBatching}`,
      spec: mlserverSpec(root, repo, env, v2Probe),
      path: "/v2/models/mlp/infer",
      body: v2Body,
    },
  );
  const result = await sweep(ctx, "python", `python: a NumPy MLP (${layers.join("→")}) in a batched Python Worker behind Shoal and behind Mosec, and as an MLServer runtime behind Shoal and behind MLServer`, contenders, s);
  const at = s.connections.includes(64) ? 64 : Math.max(...s.connections);
  result.headline = [
    { what: `Shoal / Mosec req/s at ${at} connections, the same Python Worker`, value: rps(result, "shoal", at) / rps(result, "mosec", at), goal: 1.2, unit: "x" },
    { what: `Mosec p99 / Shoal p99 at ${at} connections`, value: p99(result, "mosec", at) / p99(result, "shoal", at), goal: 1, unit: "x" },
    { what: `Shoal / MLServer req/s at ${at} connections, the same MLModel`, value: rps(result, "shoal-mlserver", at) / rps(result, "mlserver", at), goal: 2, unit: "x" },
    { what: `MLServer p99 / Shoal p99 at ${at} connections, the same MLModel`, value: p99(result, "mlserver", at) / p99(result, "shoal-mlserver", at), goal: 1, unit: "x" },
  ];
  report(ctx, result);
}

export const scenario: Scenario = {
  name: "python",
  summary: "The same batched Python Worker (a NumPy MLP) behind Shoal's front (shoal.mosec) and behind Mosec's, and as an MLServer runtime behind Shoal and behind MLServer.",
  options: { ...sweepOptions.options, model: { type: "string" } },
  help: { ...sweepOptions.help, "model <size>": "big (1024→4096→4096→1000, default) or tiny (64→128→10, for a quick check)" },
  run,
};
