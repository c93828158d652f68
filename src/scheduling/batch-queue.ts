import { ShoalError } from "../errors.js";
import type { QueueOutcome, TenantOutcome } from "../metrics/registry.js";
import { decideBatch, type BatchPolicy } from "./batcher.js";
import { autoWaitMs, LatencyModel, predictMs, Presence, retryAfter, ReturnLag } from "./latency-model.js";
import type { QueueOrder } from "./queue-order.js";
import type { Task } from "./task.js";

/**
 * A queue that predicts sends a task only if its batch, at this many times the model's forward
 * time, still ends before its deadline: the model is a mean, and a batch that runs longer than it
 * would answer late, work thrown away (docs/benchmarks.md, overload).
 */
export const SEND_MARGIN = 1.25;

/** What a {@link BatchQueue} is made of, given by its owner. */
export interface BatchQueueOptions {
  policy: BatchPolicy;
  /** Most tasks queued; ingress tasks beyond it are refused with 429. */
  capacity: number;
  /** Says whose queue is full in a 429, e.g. `stage Double_1`. */
  owner: string;
  /** The order tasks leave in: `new Fifo()` for first in, first out. */
  order: QueueOrder<Task>;
  /** Called when a partial batch may leave: the owner pulls again. */
  wake: () => void;
  /** Records how long each task that leaves waited, in ms. */
  waited: (ms: number) => void;
  /** Records what a queue rule did to a task, at its priority level (0: the queue has none). */
  counted?: (outcome: QueueOutcome, level: number) => void;
  /** The clock of tasks' arrivals and deadlines (`performance.now()` unless given). */
  now?: () => number;
  /** Workers that take from this queue now (0 while they start); 1 unless given. */
  workers?: () => number;
  /** Items of this queue at its workers now, counted by `maxWaitMs: "auto"` among those lately present (0 unless given). */
  running?: () => number;
  /** Refuse at once a request the latency model says would miss its deadline (`predictAdmission`). */
  predict?: boolean;
  /** A task admitted on a prediction of `predictedMs` was answered at this step `actualMs` after it joined. */
  predicted?: (predictedMs: number, actualMs: number) => void;
  /** The wait `maxWaitMs: "auto"` chose for a partial batch, in ms. */
  waitChosen?: (ms: number) => void;
  /** What became of a task of a queue that shares between tenants, by its tenant's share. */
  tenantCounted?: (share: string, outcome: TenantOutcome) => void;
  /** The cost of a queued item, for the policy's `maxBatchCost` and the order's length buckets (default: a body's bytes, else 1). */
  sizeOf?: (item: unknown) => number;
}

/** The cost of an item when its owner gives no `sizeOf`: a request body's bytes (undecoded), else 1. */
export function defaultCost(item: unknown): number {
  return item instanceof Uint8Array ? item.byteLength : 1;
}

/**
 * A queue of tasks with its batch policy: what a stage and a model of the shared pool both put
 * their requests in. It answers "which tasks leave now", fails what outlived its deadline, and
 * wakes its owner when a partial batch has waited long enough. A task that settles while queued
 * (its deadline timer, its client gone) leaves at once, whether or not a worker ever pulls. Who
 * sends the batch, and to which worker, is the owner's business; so is the order tasks leave in.
 */
export class BatchQueue {
  readonly policy: BatchPolicy;
  readonly capacity: number;
  readonly owner: string;
  readonly wake: () => void;
  readonly waited: (ms: number) => void;
  readonly now: () => number;
  readonly counted: (outcome: QueueOutcome, level: number) => void;
  // Its forward time by batch size, from the batches that came back: made only for a queue that
  // predicts or chooses its wait, so that no other pays for it; so are what "auto" reads besides.
  #latency: LatencyModel | undefined;
  readonly #presence: Presence | undefined;
  readonly #lag: ReturnLag | undefined;
  readonly #running: () => number;
  readonly #workers: () => number;
  readonly #predict: boolean;
  readonly #predicted: ((predictedMs: number, actualMs: number) => void) | undefined;
  readonly #waitChosen: ((ms: number) => void) | undefined;
  readonly #tenantCounted: (share: string, outcome: TenantOutcome) => void;
  readonly #sizeOf: (item: unknown) => number;
  /** The cost of the tasks queued, when the policy has a budget. */
  #cost = 0;
  /** Tasks waiting, none of them settled, in the order they leave. */
  readonly #queue: QueueOrder<Task>;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  // When a free worker first found the head's batch not yet full (Infinity: none has since the
  // last batch left): what the batch's tasks waited from then on is their batch-fill wait.
  #fillFrom = Infinity;
  // The order's own timeouts, when it has some (a priority order's queue timeouts).
  #expiry: NodeJS.Timeout | undefined;
  #expiryAt = Infinity;
  // What the order's `expire` calls back, made once: the task leaves unserved, or goes behind its level.
  #expireAt = 0;
  readonly #expired = (task: Task, level: number): void => {
    const now = this.#expireAt;
    task.queuedIn = null;
    task.queueMs += now - task.enqueuedAt;
    this.#cost -= task.cost;
    const deadline = task.deadline <= now;
    this.counted(deadline ? "expired" : "timeout", level);
    if (task.share !== undefined) this.#tenantCounted(task.share, "rejected");
    task.fail(new ShoalError("TIMEOUT", deadline ? "the deadline passed while the request was queued" : `the queue timeout of priority level ${level} passed`));
  };
  readonly #delayed = (level: number): void => this.counted("delayed", level);

  constructor(options: BatchQueueOptions) {
    this.policy = options.policy;
    this.capacity = options.capacity;
    this.owner = options.owner;
    this.wake = options.wake;
    this.waited = options.waited;
    this.now = options.now ?? (() => performance.now());
    this.counted = options.counted ?? (() => {});
    this.#queue = options.order;
    this.#workers = options.workers ?? (() => 1);
    this.#running = options.running ?? (() => 0);
    this.#presence = this.policy.maxWaitMs === "auto" ? new Presence() : undefined;
    this.#lag = this.#presence === undefined ? undefined : new ReturnLag();
    this.#predict = options.predict ?? false;
    this.#predicted = options.predicted;
    this.#waitChosen = options.waitChosen;
    this.#tenantCounted = options.tenantCounted ?? (() => {});
    this.#sizeOf = options.sizeOf ?? defaultCost;
  }

  /** Tasks waiting: what capacity counts. */
  get queued(): number {
    return this.#queue.length;
  }

  /** How long the next task to leave has waited, in ms (0: none waits): how far behind the queue is. */
  get behindMs(): number {
    const head = this.#queue.peek();
    return head === undefined ? 0 : this.now() - head.enqueuedAt;
  }

  /**
   * Queues a task. A task entering its route's first stage is refused with 429 when the queue is
   * full; one coming from an earlier stage was already accepted and is always queued.
   */
  admit(task: Task): ShoalError | undefined {
    const queue = this.#queue;
    if (task.ingress && queue.length >= this.capacity) return new ShoalError("QUEUE_FULL", `the queue of ${this.owner} is full`);
    task.share = undefined;
    if (queue.place !== undefined) {
      const refused = queue.place(task);
      if (refused !== undefined) {
        if (refused.code === "QUEUE_FULL") this.counted("full", task.level);
        return this.#refused(task, refused);
      }
    }
    const now = this.now();
    if (this.#predict && task.ingress && this.#latency?.ready === true) {
      const refused = this.#late(task, now);
      if (refused !== undefined) return this.#refused(task, refused);
    }
    if (task.share !== undefined) this.#tenantCounted(task.share, "queued");
    if (this.policy.maxBatchCost !== undefined || queue.focus !== undefined) {
      // A cost that is not a number above 0 counts as 1: a bad sizeOf must not stall the queue.
      const cost = this.#sizeOf(task.payload);
      task.cost = cost > 0 && Number.isFinite(cost) ? cost : 1;
      this.#cost += task.cost;
    } else task.cost = 0;
    task.enqueuedAt = now;
    task.queuedIn = this;
    queue.push(task);
    // Only what joins counts towards what the wait is chosen by: a refused request never fills a batch.
    this.#presence?.arrived(queue.length + this.#running());
    this.#lag?.arrived(now);
    if (queue.nextExpiry !== undefined) this.#armExpiry();
    return undefined;
  }

  #refused(task: Task, error: ShoalError): ShoalError {
    if (task.share !== undefined) this.#tenantCounted(task.share, "rejected");
    return error;
  }

  // Admission by predicted latency: the 429 (503 while no worker is up) of a task that would miss its deadline, or its prediction.
  #late(task: Task, now: number): ShoalError | undefined {
    const workers = this.#workers();
    const ahead = this.#queue.ahead?.(task) ?? this.#queue.length;
    const ms = predictMs(this.#latency!, { ahead, workers, maxBatchSize: this.policy.maxBatchSize });
    const wait = retryAfter(ms, now, task.deadline);
    if (wait === undefined) {
      task.predictedMs = ms;
      return undefined;
    }
    this.counted("shed", task.level);
    const error = new ShoalError(workers === 0 ? "NOT_READY" : "QUEUE_FULL", `${this.owner} would answer in about ${Math.ceil(ms)} ms, after the request's deadline`);
    error.retryAfterS = wait;
    return error;
  }

  /**
   * A batch of `tasks` came back from a worker after `elapsedMs`: the latency model learns from
   * it. `together` false: they were single items one after another (a stage that does not batch
   * sends several in one message), each a batch of one.
   */
  landed(tasks: readonly Task[], elapsedMs: number, together = true): void {
    if (tasks.length === 0 || (!this.#predict && this.policy.maxWaitMs !== "auto")) return;
    const latency = (this.#latency ??= new LatencyModel());
    if (together) latency.observe(tasks.length, elapsedMs);
    else latency.observe(1, elapsedMs / tasks.length);
    const now = this.now();
    this.#lag?.landed(now);
    if (this.#predicted === undefined) return;
    for (const task of tasks) {
      if (task.predictedMs === undefined) continue;
      this.#predicted(task.predictedMs, now - task.enqueuedAt);
      task.predictedMs = undefined;
    }
  }

  /** Called by a queued task that settles (deadline, disconnect): it leaves the queue now. */
  unqueue(task: Task): void {
    if (this.#queue.remove(task)) this.#cost -= task.cost;
    task.queueMs += this.now() - task.enqueuedAt;
  }

  /**
   * The tasks a free worker takes now, or undefined when there are none to take yet (the queue
   * is empty, or a partial batch waits; the queue then calls `wake` when it may leave). The
   * batcher's count may be changed by `size` (a stage that does not batch sends several items
   * to a message). The array may be empty when every task taken had outlived its deadline:
   * those are answered 408 here and never dispatched.
   */
  next(size?: (send: number) => number): Task[] | undefined {
    if (this.#queue.expire !== undefined) this.#expire();
    const head = this.#queue.peek();
    if (head === undefined) return undefined;
    const now = this.now();
    const decision = decideBatch(this.#queue.length, head.enqueuedAt, now, this.policy, this.#waitMs(now, head), this.#cost);
    if ("wakeAt" in decision) {
      if (this.#fillFrom === Infinity) this.#fillFrom = now;
      this.#wakeAt(decision.wakeAt, now);
      return undefined;
    }
    return this.#take(size === undefined ? decision.send : size(decision.send), now);
  }

  /** Takes every queued task out, for another queue to serve (a model's new instance). */
  drain(): Task[] {
    const tasks: Task[] = [];
    const now = this.now();
    this.#fillFrom = Infinity;
    for (let task = this.#queue.shift(); task !== undefined; task = this.#queue.shift()) {
      task.queuedIn = null;
      task.queueMs += now - task.enqueuedAt;
      tasks.push(task);
    }
    this.#cost = 0;
    return tasks;
  }

  // The wait of this decision: the policy's, or the one "auto" chooses from the latency model now,
  // never so long that the task to leave first could no longer make its deadline.
  #waitMs(now: number, head: Task): number {
    const { maxWaitMs } = this.policy;
    if (maxWaitMs !== "auto") return maxWaitMs;
    const workers = Math.max(1, this.#workers());
    const latency = (this.#latency ??= new LatencyModel());
    // Both made for every "auto" queue.
    const chosen = autoWaitMs(latency, { queued: this.#queue.length, maxBatchSize: this.policy.maxBatchSize, present: this.#presence!.peak / workers, backMs: this.#lag!.backMs(now) });
    // The wait counts from when a free worker first found this batch partial (the missing items
    // arrive from then on), not from the head's arrival: items that waited out a busy worker have
    // not waited for the fill. The batch leaves at `enqueuedAt + ms`: by then a full batch's time
    // must still fit before the head's deadline.
    const from = Math.min(this.#fillFrom, now) - head.enqueuedAt;
    const ms = Math.max(0, Math.min(from + chosen, head.deadline - latency.forwardMs(this.policy.maxBatchSize) - head.enqueuedAt));
    this.#waitChosen?.(Math.max(0, ms - from));
    return ms;
  }

  // Up to `count` tasks, within the policy's cost budget (the first goes whatever its cost).
  #take(count: number, now: number): Task[] {
    const tasks: Task[] = [];
    const budget = this.policy.maxBatchCost ?? Infinity;
    let spent = 0;
    // A queue that predicts sends no task its batch cannot finish in time for (with a margin): that work would be thrown away.
    const soonest = this.#predict && this.#latency?.ready === true ? now + SEND_MARGIN * this.#latency.forwardMs(count) : now;
    const fillFrom = this.#fillFrom;
    this.#fillFrom = Infinity;
    while (tasks.length < count) {
      const next = this.#queue.peek();
      if (next === undefined || (tasks.length > 0 && next.deadline > soonest && spent + next.cost > budget)) break;
      const task = this.#queue.shift()!;
      this.#cost -= task.cost;
      task.queuedIn = null;
      const waited = now - task.enqueuedAt;
      task.queueMs += waited;
      if (task.deadline <= soonest) {
        this.counted("expired", task.level);
        if (task.share !== undefined) this.#tenantCounted(task.share, "rejected");
        task.fail(new ShoalError("TIMEOUT", task.deadline <= now ? "the deadline passed while the request was queued" : "the deadline would pass before its batch is done"));
        continue;
      }
      if (task.share !== undefined) this.#tenantCounted(task.share, "served");
      spent += task.cost;
      // A task that came after the worker began to wait waited for the fill since it came.
      if (fillFrom < now) task.fillMs += now - Math.max(fillFrom, task.enqueuedAt);
      this.waited(waited);
      // Length buckets: the rest of the batch is of its first item's bucket.
      if (tasks.push(task) === 1) this.#queue.focus?.(task);
    }
    this.#queue.focus?.(undefined);
    this.#presence?.took();
    return tasks;
  }

  // The order's timeouts at this moment: what must leave unserved is answered 408 (never sent).
  #expire(): void {
    this.#expireAt = this.now();
    this.#queue.expire!(this.#expireAt, this.#expired, this.#delayed);
    this.#armExpiry();
  }

  // One timer, at the order's next timeout, so that a 408 of its own is answered on time even while every worker is busy.
  #armExpiry(): void {
    const at = this.#queue.nextExpiry!();
    if (at === this.#expiryAt) return;
    clearTimeout(this.#expiry);
    this.#expiryAt = at;
    if (at === Infinity) return;
    this.#expiry = setTimeout(() => {
      this.#expiry = undefined;
      this.#expiryAt = Infinity;
      this.#expire();
    }, Math.max(0, at - this.now()));
  }

  #wakeAt(at: number, now: number): void {
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.wake();
    }, Math.max(0, at - now));
  }
}
