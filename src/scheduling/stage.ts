import type { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics, StageMetrics } from "../metrics/registry.js";
import type { ResolvedStageOptions, StreamPolicy } from "../stage-options.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { RequestLimits } from "../workers/messages.js";
import type { Pool } from "../workers/pool.js";
import type { RestartLimit } from "../workers/restart-policy.js";
import { BatchQueue } from "./batch-queue.js";
import { queueOrderOf } from "./priority-order.js";
import type { BatchPolicy } from "./batcher.js";
import { Dispatcher, type Chooser, type Delivery, type Flight, type ItemSuccess } from "./dispatcher.js";
import { SubItems } from "./sub-items.js";
import { ResponseCache } from "./response-cache.js";
import type { Step, Task } from "./task.js";

/** Forward time, in ms, that the items of one message of a stage that does not batch may add up to. */
const SEND_BUDGET_MS = 1;
/** Most items in one message of a stage that does not batch. */
const MAX_SEND = 32;

/** What a stage needs from the server around it. */
export interface StageContext {
  moduleUrl: string;
  /** Most items queued; ingress tasks beyond it are refused with 429. */
  capacity: number;
  /** Default cap on one forward call, in ms (the server's `--timeout`). */
  timeoutMs: number;
  /** A stream's deadline, in ms (the server's `--stream-timeout`): a streaming stage's batch may run this long and `timeoutMs` more. */
  streamTimeoutMs: number;
  channel: ChannelFactory;
  /** What one request may make a worker allocate. */
  limits: RequestLimits;
  logger: Logger;
  metrics: Metrics;
  /** The server's `--max-restarts`, which the stage's worker restarts count against. */
  restarts: RestartLimit;
}

/**
 * One step of a pipeline: a queue, a batch policy and a pool of workers. Workers pull: whenever
 * one is free, the stage asks the batcher whether to send what is queued now or to wait.
 */
export class Stage implements Step, Chooser, Delivery {
  readonly policy: BatchPolicy;
  readonly dispatcher: Dispatcher;
  readonly metrics: StageMetrics;
  readonly batches: boolean;
  running = 0;
  readonly logFields: Readonly<Record<string, string>>;
  readonly stream: StreamPolicy | undefined;
  readonly gathers: boolean;
  readonly cache: ResponseCache | undefined;
  readonly #queue: BatchQueue;
  /** Counts the sub-items its fan-outs make, by route. */
  readonly #subItems: (route: string, count: number) => void;
  /** Moving average of one item's forward time in ms, round trip included (stages that do not batch). */
  #itemMs = SEND_BUDGET_MS;
  readonly #size: ((send: number) => number) | undefined;

  constructor(
    readonly name: string,
    readonly index: number,
    className: string,
    readonly options: ResolvedStageOptions,
    context: StageContext,
  ) {
    // A Worker that joins sequences between steps takes each one alone, as soon as it has room.
    const joins = options.maxActive !== undefined;
    this.policy = { maxBatchSize: joins ? 1 : options.maxBatchSize, maxWaitMs: joins ? 0 : options.maxWaitMs, preferredBatchSize: options.priority.preferredBatchSize, maxBatchCost: options.priority.maxBatchCost };
    this.metrics = context.metrics.stage(name);
    this.batches = this.policy.maxBatchSize > 1;
    this.stream = options.stream;
    this.gathers = options.gather;
    this.logFields = { stage: name };
    this.cache = options.priority.responseCache === undefined ? undefined : new ResponseCache(options.priority.responseCache.maxBytes);
    this.#subItems = context.metrics.subItems(name, options.fanOut === undefined ? [] : options.routes);
    this.#size = this.batches ? undefined : () => this.#sendSize();
    this.#queue = new BatchQueue({
      policy: this.policy,
      capacity: context.capacity,
      owner: `stage ${name}`,
      order: queueOrderOf(options.priority),
      wake: () => this.dispatcher.pump(),
      waited: (ms) => this.metrics.queueWait(ms),
      counted: (outcome, level) => this.metrics.queueOutcome(outcome, level),
      workers: () => this.pool.live,
      running: () => this.running,
      predict: options.priority.predictAdmission,
      predicted: (predictedMs, actualMs) => this.metrics.predicted(predictedMs, actualMs),
      waitChosen: (ms) => this.metrics.waitChosen(ms),
      tenantCounted: (share, outcome) => this.metrics.tenant(share, outcome),
      sizeOf: options.sizeOf,
    });
    this.dispatcher = new Dispatcher(
      {
        name,
        num: options.num,
        boot: (workerId) => ({ moduleUrl: context.moduleUrl, stageIndex: index, stageName: name, className, workerId, maxBatchSize: options.maxBatchSize, maxFanOut: options.fanOut?.max, num: options.num, limits: context.limits }),
        // A streaming batch runs as long as its streams: the requests' own deadline ends a stream
        // (an error event, its generator aborted) before the pool gives up on the worker.
        timeoutMs: options.timeoutMs ?? (options.stream === undefined ? context.timeoutMs : context.streamTimeoutMs + context.timeoutMs),
        concurrency: options.maxActive,
        env: options.env,
        channel: context.channel,
        logger: context.logger,
        metrics: this.metrics,
        restarts: context.restarts,
      },
      this,
    );
  }

  /** The stage's workers. */
  get pool(): Pool<Flight> {
    return this.dispatcher.pool;
  }

  // How many items a stage that does not batch sends in one message: each is still its own
  // forward() call, but they share one round trip. Under load the queue is deep and the worker
  // is fed without a wake-up per item; the count is held to what the worker gets through in
  // about a millisecond, so no item waits noticeably behind others it would not have waited for.
  #sendSize(): number {
    const fit = Math.floor(SEND_BUDGET_MS / Math.max(this.#itemMs, 0.001));
    return Math.max(1, Math.min(MAX_SEND, fit, Math.ceil(this.#queue.queued / this.options.num)));
  }

  /** Items waiting in this stage's queue. */
  get queued(): number {
    return this.#queue.queued;
  }

  /** How long the next item to leave its queue has waited, in ms. */
  get behindMs(): number {
    return this.#queue.behindMs;
  }

  /** Workers started and alive. */
  get liveWorkers(): number {
    return this.pool.live;
  }

  /**
   * Queues a task. A task entering its route's first stage is refused with 429 when the queue is
   * full; one coming from an earlier stage was already accepted and is always queued.
   */
  admit(task: Task): ShoalError | undefined {
    const refused = this.#queue.admit(task);
    if (refused === undefined) this.dispatcher.pump();
    return refused;
  }

  /** A stage's free worker takes what its one queue lets go now. */
  next(): Flight | undefined {
    const tasks = this.#queue.next(this.#size);
    return tasks === undefined ? undefined : { tasks, to: this };
  }

  landed({ tasks }: Flight, elapsedMs: number | undefined): void {
    if (elapsedMs === undefined) return;
    this.#queue.landed(tasks, elapsedMs, this.batches);
    if (!this.batches) this.#itemMs += (elapsedMs / tasks.length - this.#itemMs) * 0.2;
    // Sub-items share their request's trace: a batch of several of them is one entry.
    let traced: Task["trace"];
    for (const { trace } of tasks) {
      if (trace === undefined || trace === traced) continue;
      trace.push({ stage: this.name, ms: elapsedMs });
      traced = trace;
    }
  }

  succeeded(task: Task, result: ItemSuccess, contentType: string): void {
    if (result.fanOut === true) this.#fanOut(task, result.value as unknown[]);
    else if (task.egress) task.succeed(result.value as Uint8Array, result.contentType ?? contentType, result.headers);
    else task.advance(result.value, result.transfer);
  }

  // The item became sub-items, each the next stage's input (the worker kept them within the stage's bound).
  #fanOut(task: Task, values: unknown[]): void {
    this.#subItems(task.meta.route, values.length);
    SubItems.start(task, values);
  }

  failed(task: Task, error: ShoalError): void {
    task.fail(error);
  }
}
