import { ShoalError } from "../errors.js";
import { Fifo } from "./fifo.js";
import type { PrioritySettings } from "../stage-options.js";
import { activate, charge, pickShare, type Fair } from "./fair-share.js";
import { BucketOrder } from "./length-buckets.js";
import { countTake, dueOf, levelOf, pickLevel, prioritiesOf, type Priorities } from "./priorities.js";
import type { QueueOrder } from "./queue-order.js";
import type { Task } from "./task.js";

/**
 * The order of a queue with these settings: a {@link PriorityOrder} when they declare levels,
 * policies or tenants, else first in, first out, today's path; either in a {@link BucketOrder}
 * when they declare `batchBuckets`.
 */
export function queueOrderOf(settings: PrioritySettings): QueueOrder<Task> {
  const priorities = prioritiesOf(settings);
  const order = priorities === undefined ? new Fifo<Task>() : new PriorityOrder(priorities);
  return settings.batchBuckets === undefined ? order : new BucketOrder(order, settings.batchBuckets, priorities?.maxOvertakes);
}

/** A task's place in a {@link PriorityOrder}: its level (index 0 for level 1), its tenant's share there, when its time is up, and where it is. */
interface Slot {
  readonly task: Task;
  readonly level: number;
  readonly share: Share;
  readonly due: number;
  readonly seq: number;
  /** Its index in its share's heap; -1 once delayed. */
  index: number;
}

/** The tasks of one tenant at one level (of every tenant, when the queue does not share): a heap by due time, and those delayed past their queue timeout, in the order they were delayed. */
interface Share extends Fair {
  readonly key: string;
  readonly heap: Slot[];
  readonly late: Fifo<Slot>;
  count: number;
}

/** One level: its tenants' shares, those with tasks waiting, and its virtual clock of fair queuing. */
interface Level {
  readonly shares: Map<string, Share>;
  readonly active: Share[];
  virtual: number;
}

/**
 * Priority levels, each taken earliest deadline first, for a queue whose owner declares levels,
 * queue policies or tenants ({@link Priorities}; docs/scheduling.md). A free worker takes from
 * the level {@link pickLevel} says; within a level, from the tenant's share fair queuing picks
 * (fair-share.ts; one share when the queue has no tenants), the task whose time is up soonest
 * (its deadline, or its level's queue timeout), ties in arrival order; then the tasks its level
 * delayed. {@link expire} applies the levels' timeouts: the queue calls it before it takes.
 */
export class PriorityOrder implements QueueOrder<Task> {
  readonly priorities: Priorities;
  readonly #levels: Level[];
  readonly #waiting: number[];
  readonly #overtaken: number[];
  #length = 0;
  #seq = 0;

  constructor(priorities: Priorities) {
    this.priorities = priorities;
    this.#levels = Array.from({ length: priorities.levels }, () => ({ shares: new Map(), active: [], virtual: 0 }));
    this.#waiting = new Array<number>(priorities.levels).fill(0);
    this.#overtaken = new Array<number>(priorities.levels).fill(0);
  }

  get length(): number {
    return this.#length;
  }

  /** Tasks waiting at `level` (1..levels). */
  waitingAt(level: number): number {
    return this.#waiting[level - 1] ?? 0;
  }

  /**
   * Sets the task's level (and its tenant's share, when the queue shares), or says why it may
   * not join: a priority of no level (400), or its level full (429), for a task entering its route.
   */
  place(task: Task): ShoalError | undefined {
    const { priorities } = this;
    const level = levelOf(task.priority, priorities, !task.ingress);
    task.level = level ?? 0;
    task.share = priorities.tenants?.key(task.tenant);
    if (level === undefined) return new ShoalError("BAD_REQUEST", `priority ${task.priority} is out of range: the levels are 1 (highest) to ${priorities.levels}, or 0 for the default (${priorities.defaultLevel})`);
    const most = priorities.policies[level - 1]!.maxQueueSize;
    if (task.ingress && most !== undefined && this.#waiting[level - 1]! >= most) return new ShoalError("QUEUE_FULL", `priority level ${level} holds ${most} requests (its maxQueueSize)`);
    return undefined;
  }

  /**
   * Tasks that would leave before `task` (placed): those of higher levels, and of its level
   * about those its share's weight lets go first (all of its level when the queue does not share).
   */
  ahead(task: Task): number {
    let ahead = 0;
    for (let at = 0; at < task.level - 1; at++) ahead += this.#waiting[at]!;
    const level = this.#levels[task.level - 1]!;
    const all = this.#waiting[task.level - 1]!;
    if (this.priorities.tenants === undefined) return ahead + all;
    const own = level.shares.get(task.share!);
    const weight = this.priorities.tenants.weight(task.share!);
    let weights = own === undefined || own.count === 0 ? weight : 0;
    for (const share of level.active) weights += share.weight;
    return ahead + Math.min(all, Math.ceil(((own?.count ?? 0) + 1) * (weights / weight)) - 1);
  }

  /** Adds a task the queue let in (its level and `enqueuedAt` set): at its level and share, by due time. */
  push(task: Task): void {
    const at = task.level - 1;
    const level = this.#levels[at]!;
    const share = this.#share(level, task.share ?? "");
    const slot: Slot = { task, level: at, share, due: dueOf(task.deadline, task.enqueuedAt, this.priorities.policies[at]!), seq: this.#seq++, index: -1 };
    task.orderSlot = slot;
    slot.index = share.heap.length;
    share.heap.push(slot);
    up(share.heap, slot.index);
    if (share.count++ === 0) {
      activate(share, level.virtual);
      level.active.push(share);
    }
    this.#waiting[at]!++;
    this.#length++;
  }

  peek(): Task | undefined {
    const at = pickLevel(this.#waiting, this.#overtaken, this.priorities.maxOvertakes);
    if (at < 0) return undefined;
    const { active } = this.#levels[at]!;
    const share = active[pickShare(active)]!;
    return (share.heap[0] ?? share.late.peek())!.task;
  }

  shift(): Task | undefined {
    const at = pickLevel(this.#waiting, this.#overtaken, this.priorities.maxOvertakes);
    if (at < 0) return undefined;
    const level = this.#levels[at]!;
    const share = level.active[pickShare(level.active)]!;
    const slot = share.heap.length > 0 ? pop(share.heap) : share.late.shift()!;
    level.virtual = charge(share, 1);
    this.#left(slot);
    countTake(at, this.#waiting, this.#overtaken);
    return slot.task;
  }

  remove(task: Task): boolean {
    const slot = task.orderSlot as Slot | undefined;
    if (slot === undefined || slot.task !== task) return false;
    if (slot.index < 0) slot.share.late.remove(slot);
    else removeAt(slot.share.heap, slot.index);
    this.#left(slot);
    return true;
  }

  /**
   * Applies the levels' timeouts at `now`: a task whose time is up leaves through `expired`,
   * unless its level delays it and its deadline has not passed; then it is `delayed` (it goes
   * behind the rest of its share of its level).
   */
  expire(now: number, expired: (task: Task, level: number) => void, delayed: (level: number) => void): void {
    for (let at = 0; at < this.#levels.length; at++) {
      const delays = this.priorities.policies[at]!.timeoutAction === "delay";
      // A copy: a share whose last task leaves leaves the list.
      for (const { heap, late } of [...this.#levels[at]!.active]) {
        while (heap.length > 0 && heap[0]!.due <= now) {
          const slot = pop(heap);
          if (delays && slot.task.deadline > now) {
            slot.index = -1;
            late.push(slot);
            delayed(at + 1);
          } else {
            this.#left(slot);
            expired(slot.task, at + 1);
          }
        }
      }
    }
  }

  /** When {@link expire} has something to do next at a level that rejects on a queue timeout; Infinity: nothing (deadlines have their own timers). */
  nextExpiry(): number {
    let next = Infinity;
    for (let i = 0; i < this.#levels.length; i++) {
      const policy = this.priorities.policies[i]!;
      if (policy.defaultTimeoutMs === undefined || policy.timeoutAction !== "reject") continue;
      for (const { heap } of this.#levels[i]!.active) {
        const top = heap[0];
        if (top !== undefined && top.due < next) next = top.due;
      }
    }
    return next;
  }

  // The share of `key` at a level, made on first use (the tenant keys bound how many there are).
  #share(level: Level, key: string): Share {
    let share = level.shares.get(key);
    if (share === undefined) {
      share = { key, weight: this.priorities.tenants?.weight(key) ?? 1, virtual: level.virtual, heap: [], late: new Fifo<Slot>(), count: 0 };
      level.shares.set(key, share);
    }
    return share;
  }

  #left(slot: Slot): void {
    slot.task.orderSlot = undefined;
    slot.index = -1;
    this.#length--;
    const { share } = slot;
    if (--share.count === 0) {
      const { active } = this.#levels[slot.level]!;
      active.splice(active.indexOf(share), 1);
    }
    if (--this.#waiting[slot.level]! === 0) this.#overtaken[slot.level] = 0;
  }
}

// A binary min-heap of slots by due time, then arrival; each slot knows its index.
function before(a: Slot, b: Slot): boolean {
  return a.due < b.due || (a.due === b.due && a.seq < b.seq);
}

function place(heap: Slot[], i: number, slot: Slot): void {
  heap[i] = slot;
  slot.index = i;
}

function up(heap: Slot[], i: number): void {
  const slot = heap[i]!;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(slot, heap[parent]!)) break;
    place(heap, i, heap[parent]!);
    i = parent;
  }
  place(heap, i, slot);
}

function down(heap: Slot[], i: number): void {
  const slot = heap[i]!;
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    const child = left + 1 < heap.length && before(heap[left + 1]!, heap[left]!) ? left + 1 : left;
    if (!before(heap[child]!, slot)) break;
    place(heap, i, heap[child]!);
    i = child;
  }
  place(heap, i, slot);
}

function pop(heap: Slot[]): Slot {
  const top = heap[0]!;
  removeAt(heap, 0);
  return top;
}

function removeAt(heap: Slot[], i: number): void {
  const last = heap.pop()!;
  if (i === heap.length) return;
  place(heap, i, last);
  up(heap, i);
  down(heap, last.index);
}
