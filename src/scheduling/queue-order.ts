/**
 * The order in which a {@link BatchQueue}'s tasks leave: the seam a priority or deadline order
 * plugs into. Its owner (a stage, a model) chooses it; {@link Fifo} is today's. `peek` and
 * `shift` give the task that leaves next; the batch's wait counts from that task's arrival.
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
}
