/**
 * vision: image classification with a real model, EfficientNet-Lite0 (models/efficientnet-lite0/,
 * `npm run models`), `POST` a JPEG, answer its top 5. Shoal's example as it is
 * (examples/image-classification/server.ts: a sharp stage of 2 workers → a batched ONNX stage of 2
 * workers of 1 intra-op thread each, batches of up to 16, 5 ms wait) against Mosec (a Pillow stage
 * of 2 processes → a batched onnxruntime stage of 2, the same settings), MLServer and LitServe
 * (Pillow and onnxruntime in one batched step, 2 worker processes) and a plain node:http server
 * running sharp and onnxruntime-node per request; and the model's in-process limit at batch 16.
 *
 * Every server prepares the image alike (short side 256, centre 224 × 224, ImageNet's mean and
 * standard deviation, no colour profile applied) and runs the same ONNX file; the probe checks
 * each answers "tabby cat" first. Unpinned: the servers need both cores.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { join, relative } from "node:path";
import { modelFiles } from "../../examples/image-classification/imagenet.js";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { pinned } from "../lib/machine.js";
import { cacheDir, ensurePeers, mlserverSpec, mosecSpec, venvBin, VISION_PACKAGES } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { spread } from "../lib/stats.js";
import { p99, report, rps, sweep, sweepOptions, sweepSettings, wantsPeers, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

/** The example's settings (examples/image-classification/server.ts), given to every peer. */
const PREP_WORKERS = 2;
const MODEL_WORKERS = 2;
const MAX_BATCH = 16;
const MAX_WAIT_MS = 5;
/** What OnnxWorker gives each of the model stage's workers: a share of the cores. */
const THREADS = Math.max(1, Math.floor(availableParallelism() / MODEL_WORKERS));
/** The plain server's one session takes every core. */
const PLAIN_THREADS = availableParallelism();
const TABBY = "tabby, tabby cat";

/** Whether an answer is the cat's top 5; a reason when not. */
function tabby(answer: unknown): string | undefined {
  const top = (answer as { top?: { label?: string }[] } | undefined)?.top;
  return top?.length === 5 && top[0]?.label === TABBY ? undefined : `expected the top 5 with "${TABBY}" first, got ${JSON.stringify(answer).slice(0, 120)}`;
}


async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root, log, common } = ctx;
  ctx.values.connections ??= "1,4,16,64";
  const s = sweepSettings(ctx, "unpinned");
  const missing = wantsPeers(s, ["mosec", "mlserver", "litserve"]) ? ensurePeers(root, log, VISION_PACKAGES) : new Map<string, string>();
  await ensureModel("efficientnet-lite0");
  const { model, labels } = modelFiles();
  const catFile = createRequire(import.meta.url).resolve("deeplearn-squeezenet/cat.jpg");
  const cat = readFileSync(catFile);
  // MLServer's V2 JSON and LitServe's JSON carry the image base64-encoded.
  const base64 = cat.toString("base64");
  const v2 = JSON.stringify({ inputs: [{ name: "image", datatype: "BYTES", shape: [1], parameters: { content_type: "base64" }, data: [base64] }] });
  const v2File = join(cacheDir(root), "vision-v2.json");
  const litFile = join(cacheDir(root), "vision-litserve.json");
  mkdirSync(cacheDir(root), { recursive: true });
  writeFileSync(v2File, v2);
  writeFileSync(litFile, JSON.stringify({ image: base64 }));
  const jpeg = { body: "", lua: join("bench", "lua", "post-file.lua"), wrkEnv: { WRK_BODY_FILE: catFile, WRK_CONTENT_TYPE: "image/jpeg" } };
  const jsonFile = (file: string) => ({ body: "", lua: join("bench", "lua", "post-file.lua"), wrkEnv: { WRK_BODY_FILE: file, WRK_CONTENT_TYPE: "application/json" } });
  const imageProbe = (path: string) => ({ path, body: cat, contentType: "image/jpeg", check: (t: string) => tabby(JSON.parse(t)) });
  const peerEnv = (threads: number) => ({ BENCH_MODEL: model, BENCH_LABELS: labels, BENCH_PREP_NUM: String(PREP_WORKERS), BENCH_NUM: String(MODEL_WORKERS), BENCH_MAX_BATCH: String(MAX_BATCH), BENCH_MAX_WAIT_MS: String(MAX_WAIT_MS), BENCH_INTRA_OP_THREADS: String(threads) });
  const staged = `a preparation stage of ${PREP_WORKERS} workers → a batched model stage of ${MODEL_WORKERS} workers × ${THREADS} intra-op thread, max batch ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms`;
  const oneStep = `${MODEL_WORKERS} worker processes × ${THREADS} intra-op thread, each preparing and classifying; max batch ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms`;
  const shown = `deeplearn-squeezenet/cat.jpg (${cat.length.toLocaleString("en-US")} bytes, 227 × 227)`;
  const contenders: Contender[] = [
    {
      name: "shoal",
      shoal: true,
      config: `examples/image-classification/server.ts as it is: ImagePrep (sharp) → Classifier (shoal/onnx), ${staged}; the JPEG as the body`,
      spec: { script: "examples/image-classification/server.ts", args: ["--port", "{port}", "--grpc-port", "0", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], probe: imageProbe("/classify"), startTimeoutMs: 120_000 },
      path: "/classify",
      ...jpeg,
      batchMetric: "shoal_stage_batch_size",
      batchLabel: 'stage="Classifier',
    },
    {
      name: "mosec",
      config: `bench/peers/mosec_vision.py: Prepare (Pillow) → Classify (onnxruntime), ${staged}; the JPEG as the body`,
      spec: mosecSpec(root, "mosec_vision.py", peerEnv(THREADS), imageProbe("/inference")),
      path: "/inference",
      ...jpeg,
      batchMetric: "mosec_service_batch_size",
    },
    {
      name: "mlserver",
      config: `bench/peers/mlserver_vision/: a custom runtime (Pillow, then onnxruntime on the batch in predict()), adaptive batching, ${oneStep}; a V2 request with the JPEG base64-encoded in a BYTES input (${relative(root, v2File)})`,
      spec: mlserverSpec(root, join("bench", "peers", "mlserver_vision"), peerEnv(THREADS), {
        path: "/v2/models/vision/infer",
        body: v2,
        check: (t) => tabby(JSON.parse((JSON.parse(t) as { outputs: { data: string[] }[] }).outputs[0]!.data[0]!)),
      }),
      path: "/v2/models/vision/infer",
      ...jsonFile(v2File),
    },
    {
      name: "litserve",
      config: `bench/peers/litserve_vision.py: a LitAPI (Pillow in decode_request, onnxruntime in a batched predict), ${oneStep}; {"image": base64 JPEG} (${relative(root, litFile)})`,
      ...(missing.has("litserve") ? { unavailable: missing.get("litserve") } : {}),
      spec: {
        program: venvBin(root, "python"),
        runtime: "python",
        script: join("bench", "peers", "litserve_vision.py"),
        args: ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warning"],
        env: { OMP_NUM_THREADS: "1", ...peerEnv(THREADS) },
        probe: { path: "/classify", body: JSON.stringify({ image: base64 }), check: (t) => tabby(JSON.parse(t)) },
        startTimeoutMs: 120_000,
      },
      path: "/classify",
      ...jsonFile(litFile),
    },
    {
      name: "plain",
      config: `bench/servers/plain-vision.ts: node:http, sharp and one onnxruntime-node session.run per request (no batching), ${PLAIN_THREADS} intra-op threads; the JPEG as the body`,
      spec: { script: "bench/servers/plain-vision.ts", args: ["--port", "{port}", "--address", "127.0.0.1", "--intra-op-threads", String(PLAIN_THREADS)], probe: imageProbe("/classify"), startTimeoutMs: 60_000 },
      path: "/classify",
      ...jpeg,
    },
  ];
  // The in-process limit, at the start of every round (servers idle), on the same machine as the
  // servers' figures it is compared with: the model alone, at the stages' batch size and threads.
  const limitRuns: number[] = [];
  const measureLimit = async (round: number) => {
    const args = ["bench/servers/onnx-limit.mjs", "--model", model, "--batch", String(MAX_BATCH), "--sessions", String(MODEL_WORKERS), "--threads", String(THREADS), "--seconds", String(common.durationSec)];
    const [file, argv] = pinned(s.layout.server, process.execPath, args);
    const r = spawnSync(file, argv, { cwd: root, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`onnx-limit failed: ${r.stderr}`);
    limitRuns.push((JSON.parse(r.stdout) as { samplesPerSec: number }).samplesPerSec);
    log(`  round ${round} in-process limit: ${Math.round(limitRuns.at(-1)!)} images/s (batch ${MAX_BATCH}, ${MODEL_WORKERS} sessions × ${THREADS} thread)`);
  };
  const result = await sweep(ctx, "vision", "vision: EfficientNet-Lite0 on a JPEG, prepared then batched", contenders, s, { eachRound: measureLimit });
  const limit = spread(limitRuns);
  result.extra = { inProcessLimit: { imagesPerSec: limit, runs: limitRuns, batch: MAX_BATCH, sessions: MODEL_WORKERS, threads: THREADS }, image: shown };
  const at = s.connections.includes(64) ? 64 : Math.max(...s.connections);
  const ratio = (a: string, b: string) => rps(result, a, at) / rps(result, b, at);
  result.headline = [
    { what: `Shoal / Mosec images/s at ${at} connections`, value: ratio("shoal", "mosec"), goal: 1.5, unit: "x" },
    { what: `Shoal / MLServer images/s at ${at} connections`, value: ratio("shoal", "mlserver"), goal: 2, unit: "x" },
    { what: `Mosec p99 / Shoal p99 at ${at} connections`, value: p99(result, "mosec", at) / p99(result, "shoal", at), goal: 1, unit: "x" },
    { what: `MLServer p99 / Shoal p99 at ${at} connections`, value: p99(result, "mlserver", at) / p99(result, "shoal", at), goal: 1, unit: "x" },
    { what: `Shoal images/s at ${at} connections / in-process limit`, value: rps(result, "shoal", at) / limit.median, goal: 0.85, unit: "%" },
    { what: `Shoal / LitServe images/s at ${at} connections`, value: ratio("shoal", "litserve"), goal: 1, unit: "x" },
    { what: `Shoal / plain node:http images/s at ${at} connections`, value: ratio("shoal", "plain"), goal: 1, unit: "x" },
  ];
  report(ctx, result, [
    "## In-process limit",
    "",
    `\`bench/servers/onnx-limit.mjs\`: the same model on batches of ${MAX_BATCH} ready tensors, ${MODEL_WORKERS} sessions (worker threads) × ${THREADS} intra-op thread, back to back, no HTTP and no image preparation, measured at the start of each round with the servers idle: ` +
      `**${Math.round(limit.median).toLocaleString("en-US")} images/s** (median of ${limit.n}; ${Math.round(limit.min).toLocaleString("en-US")}–${Math.round(limit.max).toLocaleString("en-US")}). ` +
      `The servers also decode and resize every image on the same cores, which this limit leaves out. Every request is ${shown}.`,
    "",
  ]);
}

export const scenario: Scenario = {
  name: "vision",
  summary: "Image classification (EfficientNet-Lite0, a JPEG in, top 5 out): Shoal's two-stage example, Mosec, MLServer, LitServe, plain node:http per request, and the in-process limit.",
  options: sweepOptions.options,
  help: { ...sweepOptions.help, "connections <list>": "concurrencies to sweep, comma-separated (default 1,4,16,64)" },
  run,
};
