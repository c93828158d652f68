import { errorToWire } from "../errors.js";
import { BatchRunner, type Send } from "./batch-runner.js";
import type { FromWorker, LoadMessage, RequestLimits, RunnerIdentity, ToWorker } from "./messages.js";
import { modelClass } from "./model-classes.js";
import { V2_FAILURES, type V2Worker } from "./v2-worker.js";

/** What a model host sends back for one message. */
type Reply = { message: FromWorker; transfer: ArrayBuffer[] };

/**
 * The worker side of the shared pool: loads and unloads model instances on the coordinator's
 * word. Each instance is its runtime's Worker speaking V2 (v2-worker.ts), run by a
 * {@link BatchRunner} of its own, so it batches, warms up and fails per item as a stage's Worker
 * does; a batch goes to the runner of the instance it names.
 */
export class ModelHost {
  readonly #models = new Map<string, BatchRunner<V2Worker>>();
  /** Instances unloaded while they were still loading: dropped as soon as they are loaded. */
  readonly #cancelled = new Set<string>();

  constructor(
    readonly workerId: number,
    readonly limits: RequestLimits,
    readonly send: Send,
  ) {}

  /** Handles one message from the coordinator; a batch's result is returned to be posted. */
  async receive(message: ToWorker): Promise<Reply | undefined> {
    switch (message.kind) {
      case "load":
        return { message: await this.#load(message), transfer: [] };
      case "flow":
        for (const runner of this.#models.values()) if (runner.flow(message)) break;
        return undefined;
      case "unload": {
        const runner = this.#models.get(message.model);
        if (runner === undefined) this.#cancelled.add(message.model);
        else drop(runner);
        this.#models.delete(message.model);
        return undefined;
      }
      case "batch": {
        const runner = this.#models.get(message.model ?? "");
        if (runner !== undefined) return runner.run(message);
        const error = { code: "NOT_READY" as const, message: `model instance ${message.model} is not loaded on worker ${this.workerId}` };
        return { message: { kind: "result", seq: message.seq, error }, transfer: [] };
      }
    }
  }

  async #load(message: LoadMessage): Promise<FromWorker> {
    try {
      const boot: RunnerIdentity = { stageName: message.model, workerId: this.workerId, maxBatchSize: message.maxBatchSize, num: message.workers, limits: this.limits };
      const cls = await modelClass(message);
      // The Worker's own metrics are labelled with its model, which shares the worker with others.
      const label = message.version === "" ? message.name : `${message.name}/${message.version}`;
      const runner = await BatchRunner.start(cls, boot, (m, transfer) => this.send(m.kind === "metrics" ? { ...m, model: label } : m, transfer), V2_FAILURES);
      if (this.#cancelled.delete(message.model)) drop(runner);
      else this.#models.set(message.model, runner);
      const { platform, inputs, outputs } = runner.worker.adapter;
      // The stage options' checks (and zod) are loaded only for a model that declares streaming.
      const declared = (cls as { streaming?: unknown }).streaming;
      const stream = declared === undefined || declared === false ? undefined : (await import("../stage-options.js")).streamPolicy(label, declared);
      return { kind: "loaded", model: message.model, platform, inputs, outputs, ...(stream === undefined ? {} : { stream }) };
    } catch (err) {
      this.#cancelled.delete(message.model);
      return { kind: "loadFailed", model: message.model, error: errorToWire(err, "SERVER") };
    }
  }
}

// Stops the instance's metrics and releases what its model holds.
function drop(runner: BatchRunner<V2Worker>): void {
  runner.stop();
  runner.worker.adapter.unload();
}
