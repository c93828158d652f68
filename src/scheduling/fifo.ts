/**
 * A first-in first-out queue on a growable ring buffer: O(1) push and shift without the
 * re-indexing cost of `Array.prototype.shift` on long queues.
 */
export class Fifo<T> {
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

  // Capacity stays a power of two so that wrapping is a mask, not a modulo.
  #grow(): void {
    const old = this.#items;
    const next: (T | undefined)[] = new Array(old.length * 2);
    for (let i = 0; i < this.#length; i++) next[i] = old[(this.#head + i) & (old.length - 1)];
    this.#items = next;
    this.#head = 0;
  }
}
