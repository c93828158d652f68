import type { QueueOrder } from "./queue-order.js";

/**
 * A first-in first-out queue on a growable ring buffer: O(1) push and shift without the
 * re-indexing cost of `Array.prototype.shift` on long queues.
 */
export class Fifo<T> implements QueueOrder<T> {
  #items: (T | undefined)[] = new Array(16);
  #head = 0;
  #length = 0;

  get length(): number {
    return this.#length;
  }

  push(item: T): void {
    if (this.#length === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#length) & (this.#items.length - 1)] = item;
    this.#length++;
  }

  /** The oldest item, or undefined when empty. */
  peek(): T | undefined {
    return this.#length === 0 ? undefined : this.#items[this.#head];
  }

  /** Removes and returns the oldest item, or undefined when empty. */
  shift(): T | undefined {
    if (this.#length === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & (this.#items.length - 1);
    this.#length--;
    return item;
  }

  /**
   * Removes `item` wherever it is; false when it is not there. The search starts at the oldest:
   * items mostly leave early in arrival order (one timeout for all), so it is short.
   */
  remove(item: T): boolean {
    const mask = this.#items.length - 1;
    let at = 0;
    while (at < this.#length && this.#items[(this.#head + at) & mask] !== item) at++;
    if (at === this.#length) return false;
    // Close the gap from the head's side: the items before it move up by one.
    for (let i = at; i > 0; i--) this.#items[(this.#head + i) & mask] = this.#items[(this.#head + i - 1) & mask];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & mask;
    this.#length--;
    return true;
  }

  // Capacity stays a power of two so that wrapping is a mask, not a modulo.
  #grow(): void {
    const old = this.#items;
    const next: (T | undefined)[] = new Array(old.length * 2);
    for (let i = 0; i < this.#length; i++) next[i] = old[(this.#head + i) & (old.length - 1)];
    this.#items = next;
    this.#head = 0;
  }
}
