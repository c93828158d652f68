import { errorToWire } from "../errors.js";
import { enterWorkerContext } from "./context.js";
import type { FromWorker, ToWorker, WorkerBoot } from "./messages.js";
import { importServerModule } from "./module-loader.js";
import { WorkerRuntime } from "./runtime.js";

/** How a worker talks to its coordinator: a thread's MessagePort or a process's socket. */
export interface WorkerLink {
  /** Sends a message, moving `transfer` where the link can. Throws if the message cannot be carried. */
  post(message: FromWorker, transfer: ArrayBuffer[]): void;
  /** Sets what handles each message the coordinator sends after the boot. */
  onMessage(run: (message: ToWorker) => void): void;
  /** Ends the worker with `code` once what was posted has left. */
  exit(code: number): void;
}

/**
 * The worker side of a stage, whatever the link: imports the server's module to find its
 * Worker class, starts it, reports ready (or fatal, and exits), then runs batches from the
 * coordinator one at a time.
 */
export async function serveWorker(boot: WorkerBoot, link: WorkerLink): Promise<void> {
  if (boot.host) {
    await serveModels(boot, link);
    return;
  }
  try {
    const runtime = await start(boot, (message) => link.post(message, []));
    link.onMessage(async (batch) => {
      if (batch.kind !== "batch") return;
      try {
        const { message, transfer } = await runtime.run(batch);
        link.post(message, transfer);
      } catch (err) {
        // A result the link cannot carry (a function, a cycle) fails its batch, not the worker.
        link.post({ kind: "result", seq: batch.seq, error: errorToWire(err, "SERVER") }, []);
      }
    });
    link.post(runtime.ready, []);
  } catch (err) {
    link.post({ kind: "fatal", error: errorToWire(err, "SERVER") }, []);
    link.exit(1);
  }
}

// A worker of the shared model pool: ready at once, then loads, unloads and runs what it is told.
// Its code is imported only here, so that a stage's worker does not load the V2 codecs.
async function serveModels(boot: WorkerBoot, link: WorkerLink): Promise<void> {
  const { ModelHost } = await import("./model-host.js");
  const host = new ModelHost(boot.workerId, (message) => link.post(message, []));
  link.onMessage(async (message) => {
    try {
      const reply = await host.receive(message);
      if (reply !== undefined) link.post(reply.message, reply.transfer);
    } catch (err) {
      if (message.kind === "batch") link.post({ kind: "result", seq: message.seq, error: errorToWire(err, "SERVER") }, []);
      else throw err;
    }
  });
  link.post({ kind: "ready", contentType: "application/json" }, []);
}

async function start(boot: WorkerBoot, send: (message: FromWorker) => void): Promise<WorkerRuntime> {
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
  return WorkerRuntime.start(cls, boot, send);
}
