import { ShoalError } from "../errors.js";

/** What a control operation does to a model. */
export type ControlKind = "load" | "unload";

interface Operation {
  kind: ControlKind;
  done: Promise<void>;
}

/**
 * The control operations (load, unload) of each model, run one at a time in the order they came,
 * so that a load never races an unload of the same model. An operation that comes while the
 * last one queued for its model is of the same kind joins it: both are answered with its outcome.
 * A model holds at most `depth` operations, the running one included; one more that cannot join
 * the last is refused with 409 `CONFLICT`, since its effect would be undone or repeated by those
 * already waiting.
 */
export class ControlQueue {
  readonly #queues = new Map<string, Operation[]>();

  /** Three: the one running, and an unload then a load behind it (or a load then an unload). */
  constructor(readonly depth = 3) {}

  /**
   * Runs `operation` for the model `key` once the operations queued before it have settled, or
   * joins the last one when it is of the same `kind`. Settles with the operation's outcome.
   */
  run(key: string, kind: ControlKind, operation: () => Promise<void>): Promise<void> {
    const queue = this.#queues.get(key) ?? [];
    const last = queue.at(-1);
    if (last?.kind === kind) return last.done;
    if (queue.length >= this.depth) {
      const kinds = queue.map((o) => o.kind).join(", then ");
      return Promise.reject(new ShoalError("CONFLICT", `model '${key}' has ${kinds} under way; send the ${kind} again once they are answered`));
    }
    // The outcome of the one before does not matter: this one runs after it either way.
    const previous = last === undefined ? Promise.resolve() : last.done.then(noop, noop);
    const op: Operation = { kind, done: previous.then(operation) };
    queue.push(op);
    this.#queues.set(key, queue);
    const leave = () => {
      queue.splice(queue.indexOf(op), 1);
      if (queue.length === 0) this.#queues.delete(key);
    };
    op.done.then(leave, leave);
    return op.done;
  }

  /** The kinds of the operations queued for `key`, the running one first. */
  queued(key: string): ControlKind[] {
    return (this.#queues.get(key) ?? []).map((o) => o.kind);
  }
}

/**
 * Settles as `promise` does, or rejects with `late()` after `ms` if it has not settled by then;
 * the work behind `promise` goes on either way.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, late: () => ShoalError): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

function noop(): void {}
