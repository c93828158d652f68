import { ShoalError, errorFromWire } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics, StageMetrics } from "../metrics/registry.js";
import type { ResolvedStageOptions } from "../stage-options.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { BatchItem, ItemResult, RequestLimits, ResultMessage } from "../workers/messages.js";
import { Pool, type PoolOwner } from "../workers/pool.js";
import { attached } from "../workers/transfer.js";
import { BatchQueue } from "./batch-queue.js";
import type { BatchPolicy } from "./batcher.js";
import type { Task } from "./task.js";

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
  channel: ChannelFactory;
  /** What one request may make a worker allocate. */
  limits: RequestLimits;
  logger: Logger;
  metrics: Metrics;
}

/**
 * One step of a pipeline: a queue, a batch policy and a pool of workers. Workers pull: whenever
 * one is free, the stage asks the batcher whether to send what is queued now or to wait.
 */
export class Stage implements PoolOwner {
  readonly policy: BatchPolicy;
  readonly pool: Pool;
  readonly #queue: BatchQueue;
  /** Moving average of one item's forward time in ms, round trip included (stages that do not batch). */
  #itemMs = SEND_BUDGET_MS;
  readonly #log: Logger;
  readonly #metrics: StageMetrics;

  constructor(
    readonly name: string,
    readonly index: number,
    className: string,
    readonly options: ResolvedStageOptions,
    context: StageContext,
  ) {
    this.policy = { maxBatchSize: options.maxBatchSize, maxWaitMs: options.maxWaitMs };
    this.#log = context.logger.child({ stage: name });
    this.#metrics = context.metrics.stage(name);
    this.#queue = new BatchQueue(this.policy, context.capacity, `stage ${name}`, () => this.#pump(), (ms) => this.#metrics.queueWait(ms));
    this.pool = new Pool(
      {
        name,
        num: options.num,
        boot: (workerId) => ({ moduleUrl: context.moduleUrl, stageIndex: index, stageName: name, className, workerId, maxBatchSize: options.maxBatchSize, num: options.num, limits: context.limits }),
        timeoutMs: options.timeoutMs ?? context.timeoutMs,
        env: options.env,
        channel: context.channel,
        logger: context.logger,
        metrics: this.#metrics,
      },
      this,
    );
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
    if (refused === undefined) this.#pump();
    return refused;
  }

  onWorkerFree(): void {
    this.#pump();
  }

  onBatchDone(tasks: Task[], result: ResultMessage, contentType: string, elapsedMs: number): void {
    this.#metrics.forward(elapsedMs);
    if (this.policy.maxBatchSize === 1) this.#itemMs += (elapsedMs / tasks.length - this.#itemMs) * 0.2;
    for (const task of tasks) task.trace?.push({ stage: this.name, ms: elapsedMs });
    if (result.error !== undefined) {
      this.#logUnexpected(result.error.stack, tasks[0]);
      const error = errorFromWire(result.error);
      for (const task of tasks) task.fail(error);
      return;
    }
    const results = result.results!;
    for (let i = 0; i < tasks.length; i++) this.#advance(tasks[i]!, results[i]!, contentType);
  }

  onBatchLost(tasks: Task[], error: ShoalError): void {
    for (const task of tasks) task.fail(error);
  }

  // Hands queued work to free workers until one of them runs out.
  #pump(): void {
    const size = this.policy.maxBatchSize === 1 ? () => this.#sendSize() : undefined;
    while (this.pool.hasIdle) {
      const tasks = this.#queue.next(size);
      if (tasks === undefined) return;
      if (tasks.length > 0) this.#dispatch(tasks);
    }
  }

  #dispatch(tasks: Task[]): void {
    const items: BatchItem[] = new Array(tasks.length);
    const transfer: ArrayBuffer[] = [];
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      items[i] = { payload: task.payload, ingress: task.ingress && !task.decoded, egress: task.egress, meta: task.meta };
      if (task.transfer !== undefined) transfer.push(...task.transfer);
      // The worker has the payload now; do not keep it alive here.
      task.payload = undefined;
      task.transfer = undefined;
    }
    if (this.policy.maxBatchSize > 1) this.#metrics.batch(tasks.length);
    this.pool.dispatch(tasks, { kind: "batch", items }, transfer.length > 0 ? attached(transfer) : transfer);
  }

  #advance(task: Task, result: ItemResult, contentType: string): void {
    if (task.settled) return;
    if (!result.ok) {
      this.#logUnexpected(result.error.stack, task);
      task.fail(errorFromWire(result.error));
      return;
    }
    if (task.egress) {
      task.succeed(result.value as Uint8Array, result.contentType ?? contentType);
      return;
    }
    task.stageIndex++;
    task.payload = result.value;
    task.transfer = result.transfer;
    task.route.stages[task.stageIndex]!.admit(task);
  }

  // Unexpected exceptions reach the log with their stack; the client only sees a generic 500.
  #logUnexpected(stack: string | undefined, task: Task | undefined): void {
    if (stack !== undefined) this.#log.error({ requestId: task?.meta.requestId, err: stack }, "forward failed");
  }
}
