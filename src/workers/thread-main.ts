/**
 * Entry point of a worker thread: serves its stage over the thread's MessagePort.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { WorkerBoot } from "./messages.js";
import { serveWorker } from "./worker-main.js";

const port = parentPort!;

await serveWorker(workerData as WorkerBoot, {
  post: (message, transfer) => port.postMessage(message, transfer),
  onMessage: (run) => port.on("message", run),
  // Let the last message flush before the thread ends.
  exit: (code) => setImmediate(() => process.exit(code)),
});
