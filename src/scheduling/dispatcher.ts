import { errorFromWire, type ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { StageMetrics } from "../metrics/registry.js";
import type { StreamPolicy } from "../stage-options.js";
import type { BatchItem, BatchMessage, ItemResult, ResultMessage, StreamMessage } from "../workers/messages.js";
import { Pool, type PoolOptions, type WorkerEvents } from "../workers/pool.js";
import { attached } from "../workers/transfer.js";
import { tracer } from "../metrics/tracing.js";
import type { WorkerTraceReport } from "../metrics/worker-trace.js";
import type { Task } from "./task.js";

/** One item's successful outcome. */
export type ItemSuccess = Extract<ItemResult, { ok: true }>;

/** Where the results of a batch go: the stage, or the model version, whose queue it came from. */
export interface Delivery {
  readonly metrics: StageMetrics;
  /** Items of its batches at workers now (the dispatcher keeps it): its running requests. */
  running: number;
  /** Whether each message is one batch, counted in the batch-size metric (a stage that does not batch sends several single items at once). */
  readonly batches: boolean;
  /** Fields of the log line of an unexpected error, e.g. `{ stage: "Embed_1" }`. */
  readonly logFields: Readonly<Record<string, string>>;
  /** Set when its Worker streams. */
  readonly stream: StreamPolicy | undefined;
  /** The batch is back after `elapsedMs`, or lost (undefined); called before its tasks are settled. */
  landed(flight: Flight, elapsedMs: number | undefined): void;
  /** One task's successful result; `contentType` is the worker's usual one. */
  succeeded(task: Task, result: ItemSuccess, contentType: string): void;
  /** One task failed: its item failed, or its batch did. */
  failed(task: Task, error: ShoalError): void;
}

/** A batch on its way to a worker: the pool carries it as the batch's handle and gives it back with the results. */
export interface Flight {
  readonly tasks: Task[];
  readonly to: Delivery;
  /** On the shared pool: the model instance the worker runs the batch on. */
  readonly model?: string;
  /** The worker it goes to; undefined for any free one. */
  readonly workerId?: number;
  /** When it was sent, when it holds a traced request. */
  sentAt?: number;
}

/** The free workers, as a chooser may look at them. */
export interface IdleWorkers {
  readonly hasIdle: boolean;
  isIdle(workerId: number): boolean;
}

/**
 * What a free worker takes next: the one decision in which a stage and the shared pool differ
 * (a stage: its one queue; the pool: a model version one of the free workers hosts).
 */
export interface Chooser {
  /**
   * The next batch for a free worker, or undefined when none is due now. Its tasks may be none
   * (all of them had outlived their deadlines): the dispatcher then asks again.
   */
  next(idle: IdleWorkers): Flight | undefined;
}

/**
 * Takes batches, sends each to a worker of its pool, and delivers the results: the one dispatch
 * loop of stages and of the shared pool. Whatever comes back, every task of a batch is settled
 * once (a result, its item's error, or the batch's).
 */
export class Dispatcher {
  readonly pool: Pool<Flight>;
  readonly #chooser: Chooser;
  readonly #log: Logger;

  /** `events` may take over `onWorkerFree`, to do more than pump (the shared pool checks for drained models). */
  constructor(options: PoolOptions, chooser: Chooser, events: WorkerEvents & { onWorkerFree?(workerId: number): void } = {}) {
    this.#chooser = chooser;
    this.#log = options.logger;
    this.pool = new Pool<Flight>(options, {
      onWorkerFree: () => this.pump(),
      ...events,
      onBatchDone: (flight, result, contentType, elapsedMs) => this.#done(flight, result, contentType, elapsedMs),
      onBatchLost: (flight, error) => {
        flight.to.running -= flight.tasks.length;
        if (flight.sentAt !== undefined) this.#traced(flight, error.publicMessage);
        flight.to.landed(flight, undefined);
        for (const task of flight.tasks) if (!task.settled) flight.to.failed(task, error);
      },
      onStream: (flight, message) => this.#stream(flight, message),
    });
  }

  /** Hands queued work to free workers until they or the work run out. */
  pump(): void {
    while (this.pool.hasIdle) {
      const flight = this.#chooser.next(this.pool);
      if (flight === undefined) return;
      if (flight.tasks.length > 0) this.#send(flight);
    }
  }

  #send(flight: Flight): void {
    const { tasks } = flight;
    const items: BatchItem[] = new Array(tasks.length);
    const transfer: ArrayBuffer[] = [];
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      items[i] = { payload: task.payload, ingress: task.ingress && !task.decoded, egress: task.egress, meta: task.meta };
      if (task.streamed && task.egress) items[i]!.stream = true;
      if (task.transfer !== undefined) transfer.push(...task.transfer);
      task.batchSize = tasks.length;
      // The worker has the payload now; do not keep it alive here.
      task.payload = undefined;
      task.transfer = undefined;
    }
    flight.to.running += tasks.length;
    const message: Omit<BatchMessage, "seq"> = flight.model === undefined ? { kind: "batch", items } : { kind: "batch", items, model: flight.model };
    // Only a batch that holds a sampled request is traced: the others cost one test per task.
    if (tracer !== undefined && tasks.some((task) => task.traced !== undefined)) {
      flight.sentAt = performance.now();
      message.traced = true;
    }
    const workerId = this.pool.dispatch(flight, message, transfer.length > 0 ? attached(transfer) : transfer, flight.workerId);
    if (flight.to.batches) flight.to.metrics.batch(tasks.length, workerId);
    // A task of several steps keeps its last batch's size and worker.
    for (const task of tasks) task.workerId = workerId;
    if (flight.to.stream !== undefined) tasks.forEach((task, i) => (task.control = (action) => this.pool.control(workerId, flight, i, action)));
  }

  // The spans of a batch that came back (or was lost), before its tasks move on.
  #traced({ tasks, to, sentAt }: Flight, error: string | undefined, worker?: WorkerTraceReport): void {
    tracer?.batch(tasks, to.logFields, tasks[0]?.workerId, sentAt!, performance.now(), error, worker);
  }

  // A chunk of one task's stream, or its end.
  #stream({ tasks, to }: Flight, message: StreamMessage): void {
    const task = tasks[message.index];
    if (task === undefined || task.settled) return;
    if (message.chunk !== undefined) task.chunk(message.chunk);
    if (message.end !== true) return;
    if (message.error === undefined) {
      task.end();
      return;
    }
    const error = errorFromWire(message.error);
    this.#unexpected(to, message.error.stack, error, task);
    task.end(error);
  }

  #done(flight: Flight, result: ResultMessage, contentType: string, elapsedMs: number): void {
    const { tasks, to } = flight;
    to.metrics.forward(elapsedMs, tasks[0]!.workerId ?? 0);
    to.running -= tasks.length;
    if (flight.sentAt !== undefined) this.#traced(flight, result.error?.message, result.trace);
    to.landed(flight, elapsedMs);
    if (result.error !== undefined) {
      const error = errorFromWire(result.error);
      this.#unexpected(to, result.error.stack, error, tasks[0]);
      for (const task of tasks) {
        if (task.settled) continue;
        task.forwardMs += elapsedMs;
        to.failed(task, error);
      }
      return;
    }
    const results = result.results!;
    if (result.retries !== undefined) to.metrics.retried(result.retries);
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      const item = results[i]!;
      if (task.settled) continue;
      // Its answer's Server-Timing counts this batch.
      task.forwardMs += elapsedMs;
      if (item.ok) {
        to.succeeded(task, item, contentType);
      } else {
        const error = errorFromWire(item.error);
        this.#unexpected(to, item.error.stack, error, task);
        to.failed(task, error);
      }
    }
  }

  // A failure of the server's making (an unexpected exception, a ServerError) reaches the log with
  // its stack; the client sees only its 500. One the client caused (a body its Worker could not
  // decode: a 400) is answered and is no concern of the operator's: a debug line, no stack.
  #unexpected(to: Delivery, stack: string | undefined, error: ShoalError, task: Task | undefined): void {
    if (stack === undefined) return;
    const requestId = task?.meta.requestId;
    if (error.clientFault) this.#log.debug({ ...to.logFields, requestId, status: error.status, error: error.publicMessage }, "request failed");
    else this.#log.error({ ...to.logFields, requestId, err: stack }, "forward failed");
  }
}
