import { errorToWire } from "../errors.js";
import { BatchRunner, type Send } from "./batch-runner.js";
import { enterWorkerContext } from "./context.js";
import type { FromWorker, HostBoot, StageBoot, ToWorker, WorkerBoot } from "./messages.js";
import { importServerModule } from "./module-loader.js";

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
 * A worker's main loop, whatever the link. A stage's worker imports the server's module to find
 * its Worker class, starts it, reports ready (or fatal, and exits), then runs batches from the
 * coordinator, until it is told to stop; a worker of the shared model pool hosts models instead.
 */
export async function serveWorker(boot: WorkerBoot, link: WorkerLink): Promise<void> {
  const work = new Work(link);
  if (boot.host) {
    await serveModels(boot, link, work);
    return;
  }
  let runner: BatchRunner;
  try {
    runner = await work.track(start(boot, (message, transfer = []) => link.post(message, transfer)));
  } catch (err) {
    link.post({ kind: "fatal", error: errorToWire(err, "SERVER") }, []);
    link.exit(1);
    return;
  }
  work.serve(async (batch) => {
    if (batch.kind === "flow") runner.flow(batch);
    if (batch.kind !== "batch") return;
    try {
      const { message, transfer } = await runner.run(batch);
      link.post(message, transfer);
    } catch (err) {
      // A result the link cannot carry (a function, a cycle) fails its batch, not the worker.
      link.post({ kind: "result", seq: batch.seq, error: errorToWire(err, "SERVER") }, []);
    }
  });
  link.post(runner.ready, []);
}

// A worker of the shared model pool: ready at once, then loads, unloads and runs what it is told.
// Its code is imported only here, so that a stage's worker does not load the V2 codecs.
async function serveModels(boot: HostBoot, link: WorkerLink, work: Work): Promise<void> {
  const { ModelHost } = await import("./model-host.js");
  const host = new ModelHost(boot.workerId, boot.limits, (message, transfer = []) => link.post(message, transfer));
  work.serve(async (message) => {
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

/**
 * The work under way in a worker (start-up, and each message being handled), so that a `stop`
 * ends the worker only once all of it is done. Ending a thread while a native call it started
 * is still running (an ONNX Runtime session's run or load) aborts the whole process.
 */
class Work {
  readonly #pending = new Set<Promise<unknown>>();
  #handle: ((message: ToWorker) => Promise<void>) | undefined;
  #stopping = false;

  constructor(readonly link: WorkerLink) {
    // Listening from the start, so that a stop sent during start-up is answered at once.
    link.onMessage((message) => {
      if (message.kind === "stop") this.#stop();
      // An error no handler caught ends the worker, as an uncaught exception does.
      else if (this.#handle !== undefined) this.track(this.#handle(message)).catch((err: unknown) => setImmediate(() => { throw err; }));
    });
  }

  /** Handles each message but `stop` with `handle`, from now on. */
  serve(handle: (message: ToWorker) => Promise<void>): void {
    this.#handle = handle;
  }

  /** Counts `task` as work under way until it settles. */
  track<T>(task: Promise<T>): Promise<T> {
    this.#pending.add(task);
    const done = () => this.#pending.delete(task);
    task.then(done, done);
    return task;
  }

  #stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.link.post({ kind: "stopping" }, []);
    const settle = async () => {
      while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
    };
    void settle().then(() => this.link.exit(0));
  }
}

async function start(boot: StageBoot, send: Send): Promise<BatchRunner> {
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
  return BatchRunner.start(cls, boot, send);
}
