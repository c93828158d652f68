import type { StepWorker } from "../step-worker.js";
import type { RequestMeta } from "../worker.js";

/** Chunks a sequence may have made ahead of its reader: past it, the sequence sits out the steps until the reader catches up. */
const AHEAD = 4;

/**
 * The chunks of one sequence, from the step loop to the pull loop that streams them: an async
 * iterator the loop pushes into. Its reader ending it early (client gone) tells the loop to drop
 * the sequence.
 */
class Sequence implements AsyncIterableIterator<unknown> {
  state: unknown;
  readonly #chunks: unknown[] = [];
  #ended = false;
  #error: unknown;
  /** The reader ended it early. */
  left = false;
  #wake: (() => void) | undefined;

  constructor(
    readonly input: unknown,
    readonly meta: RequestMeta,
    /** Called when its reader takes a chunk or leaves. */
    readonly read: () => void,
  ) {}

  /** It has made as many chunks ahead of its reader as it may. */
  get ahead(): boolean {
    return this.#chunks.length >= AHEAD;
  }

  push(chunk: unknown): void {
    this.#chunks.push(chunk);
    this.#wakeReader();
  }

  end(error?: unknown): void {
    this.#ended = true;
    this.#error = error;
    this.#wakeReader();
  }

  async next(): Promise<IteratorResult<unknown>> {
    while (this.#chunks.length === 0 && !this.#ended) await new Promise<void>((resolve) => (this.#wake = resolve));
    if (this.#chunks.length > 0) {
      const value = this.#chunks.shift();
      this.read();
      return { value, done: false };
    }
    if (this.#error !== undefined) throw this.#error;
    return { value: undefined, done: true };
  }

  async return(): Promise<IteratorResult<unknown>> {
    this.left = true;
    this.read();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  #wakeReader(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/**
 * Drives a {@link StepWorker}: requests join between steps, every active sequence takes one step
 * at a time, and each leaves as soon as it is finished, failed, or no longer wanted. Each joined
 * request is an async iterator of its chunks, streamed by the batch runner like any Worker's.
 */
export class StepScheduler {
  #joining: Sequence[] = [];
  #active: Sequence[] = [];
  #running = false;
  /** Wakes a loop waiting for its readers or for new sequences. */
  #nudge: (() => void) | undefined;
  readonly #read = () => {
    const nudge = this.#nudge;
    this.#nudge = undefined;
    nudge?.();
  };

  constructor(readonly worker: StepWorker) {}

  /** Sequences now generating. */
  get active(): number {
    return this.#active.length;
  }

  /** Queues inputs to join at the next step; returns each one's chunks. */
  join(inputs: unknown[], metas: RequestMeta[]): AsyncIterable<unknown>[] {
    const joined = inputs.map((input, i) => new Sequence(input, metas[i]!, this.#read));
    this.#joining.push(...joined);
    if (this.#running) this.#read();
    else void this.#run();
    return joined;
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (this.#joining.length > 0 || this.#active.length > 0) {
        // Messages (new batches, cancellations, pauses) are read between steps, even when
        // step() computes synchronously.
        await new Promise<void>((resolve) => setImmediate(resolve));
        this.#active = this.#active.filter((seq) => !seq.left || this.#leave(seq));
        if (this.#joining.length > 0) await this.#admit();
        const stepping = this.#active.filter((seq) => !seq.ahead);
        if (stepping.length === 0) {
          // Every reader is behind: wait for one to catch up, or for a new sequence.
          if (this.#active.length > 0 && this.#joining.length === 0) await new Promise<void>((resolve) => (this.#nudge = resolve));
          continue;
        }
        await this.#step(stepping);
      }
    } finally {
      this.#running = false;
    }
  }

  async #admit(): Promise<void> {
    const joining = this.#joining.filter((seq) => !seq.left);
    this.#joining = [];
    if (joining.length === 0) return;
    try {
      const states = await this.worker.join(
        joining.map((seq) => seq.input),
        joining.map((seq) => seq.meta),
      );
      if (!Array.isArray(states) || states.length !== joining.length) throw new Error(`join() returned ${describe(states)} for ${joining.length} inputs; it must return one state per input`);
      joining.forEach((seq, i) => {
        const state: unknown = states[i];
        // An Error in place of a state fails that input alone.
        if (state instanceof Error) seq.end(state);
        else {
          seq.state = state;
          this.#active.push(seq);
        }
      });
    } catch (err) {
      for (const seq of joining) seq.end(asError(err));
    }
  }

  async #step(stepping: Sequence[]): Promise<void> {
    let results: unknown;
    try {
      results = await this.worker.step(stepping.map((seq) => seq.state));
      if (!Array.isArray(results) || results.length !== stepping.length) throw new Error(`step() returned ${describe(results)} for ${stepping.length} sequences; it must return one result per sequence`);
    } catch (err) {
      for (const seq of stepping) seq.end(asError(err));
      this.#active = this.#active.filter((seq) => !stepping.includes(seq) || this.#leave(seq));
      return;
    }
    const finished = new Set<Sequence>();
    stepping.forEach((seq, i) => {
      const result = (results as ({ chunk?: unknown; done?: boolean } | undefined)[])[i];
      if (result?.chunk !== undefined) seq.push(result.chunk);
      if (result?.done === true) {
        seq.end();
        finished.add(seq);
      }
    });
    if (finished.size > 0) this.#active = this.#active.filter((seq) => !finished.has(seq) || this.#leave(seq));
  }

  // Drops a sequence from the worker; false, so that it filters the sequence out.
  #leave(seq: Sequence): false {
    try {
      this.worker.leave(seq.state);
    } catch {
      // What leave() fails to free is the Worker's; the sequence is over either way.
    }
    return false;
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function describe(value: unknown): string {
  return Array.isArray(value) ? `an array of ${value.length}` : typeof value;
}
