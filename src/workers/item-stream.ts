import type { FlowMessage } from "./messages.js";

/** Whether `value` is an async iterable: what a streaming Worker returns for an item. */
export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && typeof (value as Record<symbol, unknown>)[Symbol.asyncIterator] === "function";
}

/**
 * One item of a streaming Worker, on the worker's side: the abort signal its `meta` carries,
 * whether its client has asked for a pause, and the loop that pulls its chunks. Chunks are pulled
 * one at a time, each after a turn of the event loop (where flow messages are read), so a
 * paused or cancelled stream stops its generator where it is.
 */
export class ItemStream {
  readonly #controller = new AbortController();
  #paused: Promise<void> | undefined;
  #resume: (() => void) | undefined;

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** What the coordinator said about this stream. */
  flow(action: FlowMessage["action"]): void {
    if (action === "pause") {
      this.#paused ??= new Promise((resolve) => (this.#resume = resolve));
      return;
    }
    if (action === "cancel") this.#controller.abort();
    this.#resume?.();
    this.#paused = undefined;
    this.#resume = undefined;
  }

  /**
   * Pulls the chunks of `source` and gives each to `take`, until it ends (true) or the stream is
   * cancelled (false). A generator left early is ended with `return()`, so its `finally` runs.
   * Throws what the generator or `take` throws.
   */
  async drain(source: AsyncIterable<unknown>, take: (chunk: unknown) => void): Promise<boolean> {
    const chunks = source[Symbol.asyncIterator]();
    let finished = false;
    try {
      for (;;) {
        // A generator that never waits on anything but itself runs in microtasks alone, which
        // would keep the coordinator's pause and cancel from being read until it ends.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.#paused !== undefined) await this.#paused;
        if (this.signal.aborted) return false;
        const next = await chunks.next();
        if (next.done === true) {
          finished = true;
          return true;
        }
        if (this.signal.aborted) return false;
        take(next.value);
      }
    } finally {
      if (!finished) await chunks.return?.();
    }
  }
}
