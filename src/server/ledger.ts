import type { Task } from "../scheduling/task.js";

/**
 * The tasks of the requests a front accepted and has not answered yet, so that all of them can
 * be failed at once when the server gives up.
 *
 * An array whose first `size` slots hold them, each task knowing its slot: a task that leaves
 * gives its slot to the last one, and the array never shrinks. Not a `Set`: V8 rebuilds a Set's
 * table every few dozen adds and deletes, and a table it has left behind still points to the
 * tasks it held. Once a full collection has moved the live table to the old generation, every
 * table after it is made there too, and the tasks (with their requests and answers) that those
 * dead tables point to live through every minor collection until the next full one: under load,
 * about 2 KiB of each request was promoted and collections grew several times slower.
 */
export class Ledger {
  readonly #tasks: (Task | undefined)[] = [];
  #size = 0;

  /** Tasks held now. */
  get size(): number {
    return this.#size;
  }

  add(task: Task): void {
    task.ledgerSlot = this.#size;
    this.#tasks[this.#size++] = task;
  }

  /** Takes `task` out; a task not held is left alone. */
  delete(task: Task): void {
    const at = task.ledgerSlot;
    if (at < 0 || this.#tasks[at] !== task) return;
    const last = this.#tasks[--this.#size]!;
    this.#tasks[at] = last;
    last.ledgerSlot = at;
    this.#tasks[this.#size] = undefined;
    task.ledgerSlot = -1;
  }

  /** The tasks held now, as a list of their own: failing one takes it out of the ledger. */
  list(): Task[] {
    return this.#tasks.slice(0, this.#size) as Task[];
  }
}
