import { ShoalError } from "../errors.js";
import { transferablesOf } from "../workers/transfer.js";
import { Task, type Queue, type Reply, type Step } from "./task.js";

/** A content-type whose bodies are JSON: `application/json`, or a `+json` type. */
export function isJsonType(contentType: string): boolean {
  return /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType);
}

/**
 * Where the sub-items of a task that fans out at step `from` are gathered: the index of the next
 * step that gathers, or `steps.length` when they are gathered at the route's end.
 */
export function gatherIndex(steps: readonly Step[], from: number): number {
  for (let i = from + 1; i < steps.length; i++) if (steps[i]!.gathers === true) return i;
  return steps.length;
}

/**
 * The buffers each value may move to a worker without a copy: its own, but none that another
 * value holds too (moving it with one would leave the other's view of it empty).
 */
export function ownBuffers(values: readonly unknown[]): (ArrayBuffer[] | undefined)[] {
  const found = values.map((value) => transferablesOf(value));
  const holders = new Map<ArrayBuffer, number>();
  for (const buffers of found) for (const buffer of buffers) holders.set(buffer, (holders.get(buffer) ?? 0) + 1);
  return found.map((buffers) => {
    const own = [...buffers].filter((buffer) => holders.get(buffer) === 1);
    return own.length > 0 ? own : undefined;
  });
}

/** The JSON array of JSON bodies, as bytes: `[a,b,…]`. */
export function jsonArray(bodies: readonly Uint8Array[]): Uint8Array {
  let length = 2 + Math.max(0, bodies.length - 1);
  for (const body of bodies) length += body.byteLength;
  const out = new Uint8Array(length);
  out[0] = 0x5b; // [
  let at = 1;
  bodies.forEach((body, i) => {
    if (i > 0) out[at++] = 0x2c; // ,
    out.set(body, at);
    at += body.byteLength;
  });
  out[at] = 0x5d; // ]
  return out;
}

/**
 * The sub-items of one task that fanned out, on their way and gathered back. Each is a task of
 * its own from the step after the fan-out to the one that gathers (queued and batched there with
 * other requests' items), with its parent's meta, deadline and trace; none is ever answered to
 * the client. The parent waits here, as a task waits in a queue: when it settles meanwhile (its
 * deadline, its client gone, a sub-item's error) its sub-items still out are dropped. When every
 * one has come through, the parent goes on to the gathering step with their outputs in order, or,
 * gathered at the route's end, is answered the JSON array of their answers.
 */
export class SubItems implements Queue {
  readonly #parent: Task;
  /** The step that gathers, or the steps' length for the route's end. */
  readonly #at: number;
  readonly #children: Task[] = [];
  /** Each sub-item's output (its answer's bytes when gathered at the route's end), by index. */
  readonly #outputs: unknown[];
  readonly #transfer: ArrayBuffer[] = [];
  #left: number;

  private constructor(parent: Task, count: number) {
    this.#parent = parent;
    this.#at = gatherIndex(parent.steps, parent.stepIndex);
    this.#outputs = new Array(count);
    this.#left = count;
  }

  /** Sends a task's sub-items on their way, one per value, in order: from now on the parent waits for them. */
  static start(parent: Task, values: readonly unknown[]): void {
    const items = new SubItems(parent, values.length);
    parent.queuedIn = items;
    if (values.length === 0) {
      items.#gathered(undefined);
      return;
    }
    const transfers = ownBuffers(values);
    const prefix = parent.steps.slice(0, items.#at);
    for (let i = 0; i < values.length && !parent.settled; i++) {
      // Gathered at a step, a sub-item's way ends with a step of its own that hands its output here.
      const steps = items.#at === parent.steps.length ? parent.steps : [...prefix, { admit: (child: Task) => items.#collect(i, child) }];
      const child = new Task(steps, parent.meta, parent.deadline, values[i], transfers[i], items.#reply(i));
      child.stepIndex = parent.stepIndex + 1;
      child.trace = parent.trace;
      child.priority = parent.priority;
      items.#children.push(child);
      const refused = child.start();
      if (refused !== undefined) child.fail(refused);
    }
  }

  /** The parent settled while its sub-items were out: those still out are dropped. */
  unqueue(): void {
    for (const child of this.#children) child.drop();
  }

  // What a sub-item's answer (gathered at the route's end) or error does: it reaches its parent.
  #reply(index: number): Reply {
    return {
      send: (body, contentType) => this.#answered(index, body, contentType),
      fail: (error) => this.#parent.fail(error),
      // A sub-item is never streamed to a client: its Worker's chunks come gathered.
      chunk: () => {},
      end: () => {},
      release: () => {},
    };
  }

  // A sub-item came to the step that gathers: its way ends here, settled without an answer of its
  // own (and with no word to the worker that had it: its batch is done).
  #collect(index: number, child: Task): undefined {
    this.#outputs[index] = child.payload;
    if (child.transfer !== undefined) this.#transfer.push(...child.transfer);
    child.control = undefined;
    child.drop();
    this.#arrived(child);
    return undefined;
  }

  #answered(index: number, body: Uint8Array, contentType: string): void {
    if (!isJsonType(contentType)) {
      this.#parent.fail(new ShoalError("ENCODING", `a sub-item was answered as ${contentType}; the sub-items gathered at a route's end are answered as one JSON array, so its last stage must encode JSON`));
      return;
    }
    this.#outputs[index] = body;
    this.#arrived(this.#children[index]!);
  }

  #arrived(child: Task): void {
    if (--this.#left === 0) this.#gathered(child);
  }

  // Every sub-item has come through. The last one held its parent back the longest: its parent's
  // Server-Timing counts its queue and forward times.
  #gathered(last: Task | undefined): void {
    const parent = this.#parent;
    if (parent.settled) return;
    parent.queuedIn = null;
    if (last !== undefined) {
      parent.queueMs += last.queueMs;
      parent.forwardMs += last.forwardMs;
    }
    if (this.#at === parent.steps.length) parent.succeed(jsonArray(this.#outputs as Uint8Array[]), "application/json");
    else parent.advance(this.#outputs, this.#transfer.length > 0 ? this.#transfer : undefined, this.#at);
  }
}
