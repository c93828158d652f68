/**
 * pipeline: Mosec's headline design, a CPU preprocessing stage (2 workers) feeding a batched model
 * stage (1 worker, batches of up to 32, 5 ms wait), for Shoal and Mosec. The model is a generated
 * 256→1024→1024→10 MLP (5 MB); a request is ~1 KB of text.
 *
 * MLServer has no multi-stage pipelines inside one server (a model is one predict() step; chaining
 * is Seldon Core's job), so the table lists it as not measured. Unpinned: 3 workers on 2 cores.
 */
import { relative } from "node:path";
import { ensureMlp, ensurePeers, mosecSpec } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { peakRps, report, rps, sweep, sweepOptions, sweepSettings, wantsPeers, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

/** About 1 KB of text, the same for every request. */
const TEXT = "Fish swim in shoals for safety and to find food; a shoal is any group of fish that stay together. ".repeat(10);

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root, log } = ctx;
  const s = sweepSettings(ctx, "unpinned");
  if (wantsPeers(s, ["mosec"])) ensurePeers(root, log);
  const model = relative(root, ensureMlp(root, "mlp-med", { inputs: 256, hidden: 1024, layers: 2, outputs: 10 }, log));
  const body = JSON.stringify({ text: TEXT });
  const probe = {
    path: "/inference",
    body,
    check: (t: string) => {
      const out = (JSON.parse(t) as { output?: number[][] }).output;
      return out?.[0]?.length === 10 ? undefined : `expected 10 scores, got ${t.slice(0, 80)}`;
    },
  };
  const contenders: Contender[] = [
    {
      name: "shoal",
      shoal: true,
      config: "bench/servers/shoal-pipeline.ts: Featurize (num 2) → shoal/onnx (num 1, 1 intra-op thread, max batch 32, wait 5 ms)",
      spec: { script: "bench/servers/shoal-pipeline.ts", args: ["--model", model, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], probe, startTimeoutMs: 60_000 },
      path: "/inference",
      body,
      batchMetric: "shoal_stage_batch_size",
    },
    {
      name: "mosec",
      config: "bench/peers/mosec_pipeline.py: Featurize Worker (num 2) → Inference Worker with onnxruntime (num 1, 1 intra-op thread, max_batch_size 32, max_wait_time 5 ms)",
      spec: mosecSpec(root, "mosec_pipeline.py", { BENCH_MODEL: model }, probe),
      path: "/inference",
      body,
      batchMetric: "mosec_service_batch_size",
    },
    {
      name: "mlserver",
      config: "MLServer",
      unavailable: "no multi-stage pipeline in one MLServer (a model is one predict() step)",
      path: "",
      body: "",
    },
  ];
  const result = await sweep(ctx, "pipeline", "pipeline: featurize (2 workers) → batched MLP (1 worker)", contenders, s);
  const at = s.connections.includes(64) ? 64 : Math.max(...s.connections);
  result.headline = [
    { what: "Shoal / Mosec peak req/s", value: peakRps(result, "shoal") / peakRps(result, "mosec"), goal: 1, unit: "x" },
    { what: `Shoal / Mosec req/s at ${at} connections`, value: rps(result, "shoal", at) / rps(result, "mosec", at), goal: 1, unit: "x" },
  ];
  report(ctx, result);
}

export const scenario: Scenario = {
  name: "pipeline",
  summary: "A CPU preprocessing stage (2 workers) feeding a batched ONNX stage: Shoal and Mosec.",
  options: sweepOptions.options,
  help: sweepOptions.help,
  run,
};
