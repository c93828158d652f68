/**
 * The upper limit of the model and vision scenarios: the model run in-process, no HTTP, no JSON, at a fixed
 * batch size, by `--sessions` worker threads each with its own session of `--threads` intra-op
 * threads, back to back for `--seconds`. Prints one JSON line: {samplesPerSec, runs, ...}.
 * Plain JavaScript: Node 20 does not carry tsx's loader into worker threads.
 *
 *   node bench/servers/onnx-limit.mjs --model bench/.cache/mlp-big.onnx --batch 32 --sessions 2 --threads 1 --seconds 5
 */
import { parseArgs } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import ort from "onnxruntime-node";

/** @param {{model: string, batch: number, threads: number, seconds: number}} job */
async function measure(job) {
  const session = await ort.InferenceSession.create(job.model, { intraOpNumThreads: job.threads, interOpNumThreads: 1, executionMode: "sequential", graphOptimizationLevel: "all" });
  const name = session.inputNames[0];
  // An item's shape is the model's (a row, an image); the batch axis is dynamic.
  const item = session.inputMetadata[0].shape.slice(1).map(Number);
  const size = item.reduce((a, b) => a * b, 1);
  const data = Float32Array.from({ length: job.batch * size }, (_, i) => ((i * 7) % 10) / 10);
  const feeds = { [name]: new ort.Tensor("float32", data, [job.batch, ...item]) };
  for (let i = 0; i < 10; i++) await session.run(feeds);
  // All sessions start measuring together, once every one has warmed up.
  parentPort.postMessage("ready");
  await new Promise((resolve) => parentPort.once("message", resolve));
  let runs = 0;
  const end = performance.now() + job.seconds * 1000;
  while (performance.now() < end) {
    await session.run(feeds);
    runs++;
  }
  return runs;
}

if (isMainThread) {
  const { values } = parseArgs({
    options: { model: { type: "string" }, batch: { type: "string", default: "32" }, sessions: { type: "string", default: "2" }, threads: { type: "string", default: "1" }, seconds: { type: "string", default: "5" } },
  });
  if (values.model === undefined) throw new Error("--model is required");
  const job = { model: values.model, batch: Number(values.batch), threads: Number(values.threads), seconds: Number(values.seconds) };
  const workers = Array.from({ length: Number(values.sessions) }, () => new Worker(new URL(import.meta.url), { workerData: job }));
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once("message", resolve))));
  const t0 = performance.now();
  for (const w of workers) w.postMessage("go");
  const runs = await Promise.all(workers.map((w) => new Promise((resolve, reject) => (w.once("message", resolve), w.once("error", reject)))));
  const secs = (performance.now() - t0) / 1000;
  const total = runs.reduce((a, b) => a + b, 0);
  process.stdout.write(JSON.stringify({ samplesPerSec: (total * job.batch) / secs, runsPerSec: total / secs, runs, ...job, sessions: workers.length }) + "\n");
} else {
  parentPort.postMessage(await measure(workerData));
}
