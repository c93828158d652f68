/** What a {@link Ledger} holds: an entry that knows its slot while it is held (-1: none). */
export interface Slotted {
  ledgerSlot: number;
}

/**
 * What the serving core holds of the requests under way (their tasks, their uploads), so that all
 * of them can be failed at once when the server gives up.
 *
 * An array whose first `size` slots hold them, each entry knowing its slot: one that leaves gives
 * its slot to the last one, and the array never shrinks. Not a `Set` or a `Map`: V8 rebuilds
 * their tables every few dozen adds and deletes, and a table it has left behind still points to
 * the entries it held. Once a full collection has moved the live table to the old generation,
 * every table after it is made there too, and the entries (with their requests and answers) that
 * those dead tables point to live through every minor collection until the next full one: under
 * load, about 2 KiB of each request was promoted and collections grew several times slower.
 */
export class Ledger<T extends Slotted> {
  readonly #entries: (T | undefined)[] = [];
  #size = 0;

  /** Entries held now. */
  get size(): number {
    return this.#size;
  }

  add(entry: T): void {
    entry.ledgerSlot = this.#size;
    this.#entries[this.#size++] = entry;
  }

  /** Takes `entry` out; one not held is left alone. */
  delete(entry: T): void {
    const at = entry.ledgerSlot;
    if (at < 0 || this.#entries[at] !== entry) return;
    const last = this.#entries[--this.#size]!;
    this.#entries[at] = last;
    last.ledgerSlot = at;
    this.#entries[this.#size] = undefined;
    entry.ledgerSlot = -1;
  }

  /** The entries held now, as a list of their own: failing one takes it out of the ledger. */
  list(): T[] {
    return this.#entries.slice(0, this.#size) as T[];
  }
}
