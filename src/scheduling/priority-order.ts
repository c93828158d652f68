import { ShoalError } from "../errors.js";
import { Fifo } from "./fifo.js";
import type { PrioritySettings } from "../stage-options.js";
import { countTake, dueOf, levelOf, pickLevel, prioritiesOf, type Priorities } from "./priorities.js";
import type { QueueOrder } from "./queue-order.js";
import type { Task } from "./task.js";

/** The order of a queue with these settings: a {@link PriorityOrder} when they declare levels or policies, else first in, first out, today's path. */
export function queueOrderOf(settings: PrioritySettings): QueueOrder<Task> {
  const priorities = prioritiesOf(settings);
  return priorities === undefined ? new Fifo() : new PriorityOrder(priorities);
}

/** A task's place in a {@link PriorityOrder}: its level (index 0 for level 1), when its time is up, and where it is. */
interface Slot {
  readonly task: Task;
  readonly level: number;
  readonly due: number;
  readonly seq: number;
  /** Its index in its level's heap; -1 once delayed. */
  index: number;
}

/** The tasks of one level: a heap by due time, and those delayed past their queue timeout, in the order they were delayed. */
interface Level {
  readonly heap: Slot[];
  readonly late: Fifo<Slot>;
}

/**
 * Priority levels, each taken earliest deadline first, for a queue whose owner declares levels
 * or queue policies ({@link Priorities}; docs/scheduling.md). A free worker takes from the
 * level {@link pickLevel} says; within a level, the task whose time is up soonest (its
 * deadline, or its level's queue timeout), ties in arrival order; then the tasks its level
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
    this.#levels = Array.from({ length: priorities.levels }, () => ({ heap: [], late: new Fifo<Slot>() }));
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

  /** Sets the task's level, or says why it may not join: a priority of no level (400), or its level full (429), for a task entering its route. */
  place(task: Task): ShoalError | undefined {
    const { priorities } = this;
    const level = levelOf(task.priority, priorities, !task.ingress);
    task.level = level ?? 0;
    if (level === undefined) return new ShoalError("BAD_REQUEST", `priority ${task.priority} is out of range: the levels are 1 (highest) to ${priorities.levels}, or 0 for the default (${priorities.defaultLevel})`);
    const most = priorities.policies[level - 1]!.maxQueueSize;
    if (task.ingress && most !== undefined && this.#waiting[level - 1]! >= most) return new ShoalError("QUEUE_FULL", `priority level ${level} holds ${most} requests (its maxQueueSize)`);
    return undefined;
  }

  /** Adds a task the queue let in (its level and `enqueuedAt` set): at its level, by due time. */
  push(task: Task): void {
    const level = task.level - 1;
    const slot: Slot = { task, level, due: dueOf(task.deadline, task.enqueuedAt, this.priorities.policies[level]!), seq: this.#seq++, index: -1 };
    task.orderSlot = slot;
    const { heap } = this.#levels[level]!;
    slot.index = heap.length;
    heap.push(slot);
    up(heap, slot.index);
    this.#waiting[level]!++;
    this.#length++;
  }

  peek(): Task | undefined {
    const at = pickLevel(this.#waiting, this.#overtaken, this.priorities.maxOvertakes);
    if (at < 0) return undefined;
    const level = this.#levels[at]!;
    return (level.heap[0] ?? level.late.peek())!.task;
  }

  shift(): Task | undefined {
    const at = pickLevel(this.#waiting, this.#overtaken, this.priorities.maxOvertakes);
    if (at < 0) return undefined;
    const level = this.#levels[at]!;
    const slot = level.heap.length > 0 ? pop(level.heap) : level.late.shift()!;
    this.#left(slot);
    countTake(at, this.#waiting, this.#overtaken);
    return slot.task;
  }

  remove(task: Task): boolean {
    const slot = task.orderSlot as Slot | undefined;
    if (slot === undefined || slot.task !== task) return false;
    const level = this.#levels[slot.level]!;
    if (slot.index < 0) level.late.remove(slot);
    else removeAt(level.heap, slot.index);
    this.#left(slot);
    return true;
  }

  /**
   * Applies the levels' timeouts at `now`: a task whose time is up leaves through `expired`,
   * unless its level delays it and its deadline has not passed; then it is `delayed` (it goes
   * behind the rest of its level).
   */
  expire(now: number, expired: (task: Task, level: number) => void, delayed: (level: number) => void): void {
    for (let at = 0; at < this.#levels.length; at++) {
      const { heap, late } = this.#levels[at]!;
      const delays = this.priorities.policies[at]!.timeoutAction === "delay";
      while (heap.length > 0 && heap[0]!.due <= now) {
        const slot = pop(heap);
        if (delays && slot.task.deadline > now) {
          late.push(slot);
          delayed(at + 1);
        } else {
          this.#left(slot);
          expired(slot.task, at + 1);
        }
      }
    }
  }

  /** When {@link expire} has something to do next at a level that rejects on a queue timeout; Infinity: nothing (deadlines have their own timers). */
  nextExpiry(): number {
    let at = Infinity;
    for (let i = 0; i < this.#levels.length; i++) {
      const policy = this.priorities.policies[i]!;
      const top = this.#levels[i]!.heap[0];
      if (top !== undefined && policy.defaultTimeoutMs !== undefined && policy.timeoutAction === "reject" && top.due < at) at = top.due;
    }
    return at;
  }

  #left(slot: Slot): void {
    slot.task.orderSlot = undefined;
    slot.index = -1;
    this.#length--;
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
