/**
 * The least memory the multimodel scenario's Shoal could hold on this runtime: one process, two
 * worker threads (with the young generation Shoal gives its pool's threads), each holding an
 * onnxruntime-node session of each of the 20 small models, and nothing else: no HTTP, gRPC,
 * protocol, metrics or logs. Prints its PSS and RSS once both threads have loaded every model.
 * Plain JavaScript: Node 20 does not carry tsx's loader into worker threads.
 *
 *   GLIBC_TUNABLES=glibc.malloc.mmap_threshold=262144:glibc.malloc.arena_max=2 node bench/tools/pool-floor.mjs
 *
 * Needs bench/.cache/small-01.onnx ... small-20.onnx: run `npm run bench -- multimodel` once first.
 */
import { readFileSync } from "node:fs";
import { isMainThread, parentPort, Worker } from "node:worker_threads";

const MODELS = 20;
const WORKERS = 2;
const cache = new URL("../.cache/", import.meta.url);

if (isMainThread) {
  const workers = Array.from({ length: WORKERS }, () => new Worker(new URL(import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 4 } }));
  await Promise.all(workers.map((w) => new Promise((resolve, reject) => (w.once("message", resolve), w.once("error", reject)))));
  // Let the threads' start-up garbage go before reading.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const rollup = readFileSync(`/proc/${process.pid}/smaps_rollup`, "utf8");
  const mib = (field) => (Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)[1]) / 1024).toFixed(0);
  process.stdout.write(`Node ${process.versions.node}, ${WORKERS} worker threads × ${MODELS} sessions: PSS ${mib("Pss")} MiB, RSS ${mib("Rss")} MiB\n`);
  process.exit(0);
} else {
  const { default: ort } = await import("onnxruntime-node");
  const sessions = [];
  for (let i = 1; i <= MODELS; i++) {
    const file = new URL(`small-${String(i).padStart(2, "0")}.onnx`, cache);
    sessions.push(await ort.InferenceSession.create(file.pathname, { intraOpNumThreads: 1, interOpNumThreads: 1 }));
  }
  parentPort.postMessage(sessions.length);
  setInterval(() => {}, 60_000);
}
