import type { ShoalError } from "../errors.js";

/**
 * The order in which a {@link BatchQueue}'s tasks leave: the seam a priority or deadline order
 * plugs into. Its owner (a stage, a model) chooses it; {@link Fifo} is today's default, and
 * {@link PriorityOrder} the order of a queue with priority levels. `peek` and `shift` give the
 * task that leaves next; the batch's wait counts from that task's arrival. The optional hooks
 * are for an order with rules of its own; a queue without them pays nothing for them.
 */
export interface QueueOrder<T> {
  /** Items waiting. */
  readonly length: number;
  /** Adds an item. */
  push(item: T): void;
  /** The item that leaves next, or undefined when empty. */
  peek(): T | undefined;
  /** Removes and returns the item that leaves next, or undefined when empty. */
  shift(): T | undefined;
  /** Removes `item` wherever it is (it settled while queued); false when it is not there. */
  remove(item: T): boolean;
  /** Finds where `item` goes (asked before `push`), or why it may not join. */
  place?(item: T): ShoalError | undefined;
  /** Applies the order's timeouts at `now`: what must leave unserved goes to `expired`; what it puts behind others is `delayed`. */
  expire?(now: number, expired: (item: T, level: number) => void, delayed: (level: number) => void): void;
  /** How many of its items leave before `item` would, were it pushed now (its place set); unset: all of them. */
  ahead?(item: T): number;
  /** When `expire` has something to do next, on the queue's clock (Infinity: nothing). */
  nextExpiry?(): number;
  /** While a batch is taken: from its first item on, `peek` and `shift` give only items that may join it (length buckets); undefined once it is taken. */
  focus?(leader: T | undefined): void;
}
