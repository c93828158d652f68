import { ShoalError } from "../errors.js";
import type { QueueOutcome } from "../metrics/registry.js";
import { decideBatch, type BatchPolicy } from "./batcher.js";
import type { QueueOrder } from "./queue-order.js";
import type { Task } from "./task.js";

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
    const deadline = task.deadline <= now;
    this.counted(deadline ? "expired" : "timeout", level);
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
    if (queue.place !== undefined) {
      const refused = queue.place(task);
      if (refused !== undefined) {
        if (refused.code === "QUEUE_FULL") this.counted("full", task.level);
        return refused;
      }
    }
    task.enqueuedAt = this.now();
    task.queuedIn = this;
    queue.push(task);
    if (queue.nextExpiry !== undefined) this.#armExpiry();
    return undefined;
  }

  /** Called by a queued task that settles (deadline, disconnect): it leaves the queue now. */
  unqueue(task: Task): void {
    this.#queue.remove(task);
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
    const decision = decideBatch(this.#queue.length, head.enqueuedAt, now, this.policy);
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
    return tasks;
  }

  #take(count: number, now: number): Task[] {
    const tasks: Task[] = [];
    const fillFrom = this.#fillFrom;
    this.#fillFrom = Infinity;
    while (tasks.length < count) {
      const task = this.#queue.shift();
      if (task === undefined) break;
      task.queuedIn = null;
      const waited = now - task.enqueuedAt;
      task.queueMs += waited;
      if (task.deadline <= now) {
        this.counted("expired", task.level);
        task.fail(new ShoalError("TIMEOUT", "the deadline passed while the request was queued"));
        continue;
      }
      // A task that came after the worker began to wait waited for the fill since it came.
      if (fillFrom < now) task.fillMs += now - Math.max(fillFrom, task.enqueuedAt);
      this.waited(waited);
      tasks.push(task);
    }
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
