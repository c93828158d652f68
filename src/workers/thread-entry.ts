/**
 * Entry point of a worker thread: imports the server's module to find its Worker class, starts
 * it, then runs batches from the coordinator one at a time.
 */
import { parentPort, workerData } from "node:worker_threads";
import { errorToWire } from "../errors.js";
import { enterWorkerContext } from "./context.js";
import { importServerModule } from "./module-loader.js";
import type { BatchMessage, FromWorker, WorkerBoot } from "./messages.js";
import { WorkerRuntime } from "./runtime.js";

const port = parentPort!;
const boot = workerData as WorkerBoot;
const post = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

async function start(): Promise<WorkerRuntime> {
  const context = enterWorkerContext(boot);
  await importServerModule(boot.moduleUrl);
  const cls = context.stages[boot.stageIndex];
  if (cls === undefined || cls.name !== boot.className) {
    const found = cls === undefined ? "nothing" : `class ${cls.name}`;
    throw new Error(
      `${boot.moduleUrl} registered ${found} as stage ${boot.stageIndex + 1} in the worker, where the server has ${boot.className}: ` +
        "call appendWorker() unconditionally, in the same order, at the module's top level",
    );
  }
  return WorkerRuntime.start(cls, boot, post);
}

try {
  const runtime = await start();
  port.on("message", async (batch: BatchMessage) => {
    const { message, transfer } = await runtime.run(batch);
    try {
      post(message, transfer);
    } catch (err) {
      // A result that structured clone cannot carry (a function, say) fails its batch, not the worker.
      post({ kind: "result", seq: batch.seq, error: errorToWire(err, "SERVER") });
    }
  });
  post(runtime.ready);
} catch (err) {
  post({ kind: "fatal", error: errorToWire(err, "SERVER") });
  // Let the message flush before the thread ends.
  setImmediate(() => process.exit(1));
}
