/**
 * Length buckets: a batch holds items of one bucket of cost (`sizeOf`), so that a model that pads
 * a batch to its longest item pads little. The pure decision is {@link bucketOf}; the order that
 * applies it is {@link BucketOrder}, around a queue's own order (first in first out, or priority
 * levels). docs/scheduling.md states the rule.
 */
import { MAX_OVERTAKES } from "./priorities.js";
import type { QueueOrder } from "./queue-order.js";
import type { Task } from "./task.js";

/** Most items a bucketed order sets aside while it looks for items of the bucket it fills. */
export const MAX_SET_ASIDE = 256;

/**
 * The bucket of an item of `cost`: the index of the first bound it does not exceed, or
 * `bounds.length` past the last. `bounds` ascending: `[16, 64, 256]` makes four buckets,
 * ≤ 16, ≤ 64, ≤ 256 and the rest.
 */
export function bucketOf(cost: number, bounds: readonly number[]): number {
  let bucket = 0;
  while (bucket < bounds.length && cost > bounds[bucket]!) bucket++;
  return bucket;
}

/**
 * A queue order that fills each batch from one bucket. The batch's first item is the one the
 * inner order gives next, whatever its bucket, so the inner order's rules (priority, deadline,
 * tenants) decide who leads and nothing starves. While the batch fills ({@link focus} set), it
 * gives only items of the leader's bucket, in the inner order, setting the others aside (at most
 * {@link MAX_SET_ASIDE}). Items set aside go, highest level first, before the inner order's next
 * items of their level or lower: they were ahead of those when set aside. Items of a higher
 * level still overtake them, at most `maxOvertakes` in a row, as the levels' own rule bounds it.
 */
export class BucketOrder implements QueueOrder<Task> {
  readonly #inner: QueueOrder<Task>;
  readonly #bounds: readonly number[];
  readonly #maxOvertakes: number;
  /** Items taken from the inner order while filling another bucket, in the order it gave them. */
  readonly #aside: Task[] = [];
  /** The bucket the batch being taken fills; -1 between batches. */
  #focus = -1;
  /** Items of the inner order taken in a row while items were set aside. */
  #passed = 0;
  readonly place?: QueueOrder<Task>["place"];
  readonly expire?: QueueOrder<Task>["expire"];
  readonly nextExpiry?: QueueOrder<Task>["nextExpiry"];

  constructor(inner: QueueOrder<Task>, bounds: readonly number[], maxOvertakes = MAX_OVERTAKES) {
    this.#inner = inner;
    this.#bounds = bounds;
    this.#maxOvertakes = maxOvertakes;
    // The inner order's own rules, where it has them; items set aside have left it.
    if (inner.place !== undefined) this.place = (task) => inner.place!(task);
    if (inner.expire !== undefined) this.expire = (now, expired, delayed) => inner.expire!(now, expired, delayed);
    if (inner.nextExpiry !== undefined) this.nextExpiry = () => inner.nextExpiry!();
  }

  get length(): number {
    return this.#inner.length + this.#aside.length;
  }

  push(task: Task): void {
    this.#inner.push(task);
  }

  peek(): Task | undefined {
    if (this.#focus >= 0) return this.#alike(false);
    const at = this.#asideFirst();
    return at < 0 ? this.#inner.peek() : this.#aside[at];
  }

  shift(): Task | undefined {
    if (this.#focus >= 0) return this.#alike(true);
    const at = this.#asideFirst();
    if (at >= 0) {
      this.#passed = 0;
      return this.#aside.splice(at, 1)[0];
    }
    if (this.#aside.length > 0) this.#passed++;
    return this.#inner.shift();
  }

  remove(task: Task): boolean {
    const at = this.#aside.indexOf(task);
    if (at < 0) return this.#inner.remove(task);
    this.#aside.splice(at, 1);
    return true;
  }

  /** Those that leave before `task`: the inner order's, and every item set aside. */
  ahead(task: Task): number {
    return (this.#inner.ahead?.(task) ?? this.#inner.length) + this.#aside.length;
  }

  /** From now on gives only items of `leader`'s bucket (the batch's first item), until called with undefined. */
  focus(leader: Task | undefined): void {
    this.#focus = leader === undefined ? -1 : bucketOf(leader.cost, this.#bounds);
  }

  // The item set aside that goes next, when it goes before the inner order's next (-1: none does): the first of the highest level.
  #asideFirst(): number {
    const aside = this.#aside;
    if (aside.length === 0) return -1;
    let at = 0;
    for (let i = 1; i < aside.length; i++) if (aside[i]!.level < aside[at]!.level) at = i;
    // Without levels (first in, first out) they were ahead of every item still in the inner order.
    const next = this.place === undefined ? undefined : this.#inner.peek();
    return next === undefined || next.level >= aside[at]!.level || this.#passed >= this.#maxOvertakes ? at : -1;
  }

  // The next item of the focused bucket: among those set aside, else the inner order's next ones, setting others aside.
  #alike(take: boolean): Task | undefined {
    const aside = this.#aside;
    for (let i = 0; i < aside.length; i++) {
      if (bucketOf(aside[i]!.cost, this.#bounds) === this.#focus) return take ? aside.splice(i, 1)[0] : aside[i];
    }
    while (aside.length < MAX_SET_ASIDE) {
      const next = this.#inner.peek();
      if (next === undefined) return undefined;
      if (bucketOf(next.cost, this.#bounds) === this.#focus) return take ? this.#inner.shift() : next;
      aside.push(this.#inner.shift()!);
    }
    return undefined;
  }
}
