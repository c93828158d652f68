import type { WorkerClass } from "../worker.js";
import type { StageBoot } from "./messages.js";

/**
 * How a worker finds the user's Worker class: it imports the server's main module again, as
 * Node's cluster does. Inside a worker, `new Server()` and `appendWorker()` only record the
 * stages here, and `run()` returns at once; the worker then takes the class at its stage index.
 *
 * The state lives on `globalThis` under a registered symbol so that two copies of this package
 * in one thread (say, the user's `shoal` and a linked one) still agree.
 */
interface WorkerContext {
  boot: StageBoot;
  /** The Worker classes registered by the module, in `appendWorker()` order. */
  stages: WorkerClass[];
}

const KEY = Symbol.for("shoal.worker-context");
type Holder = { [KEY]?: WorkerContext };

/** The boot data when this thread is a Shoal worker; undefined on the coordinator. */
export function workerContext(): WorkerContext | undefined {
  return (globalThis as Holder)[KEY];
}

/** Marks this thread as a worker before the user's module is imported. */
export function enterWorkerContext(boot: StageBoot): WorkerContext {
  const context: WorkerContext = { boot, stages: [] };
  (globalThis as Holder)[KEY] = context;
  return context;
}
