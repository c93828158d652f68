import type { StreamSettings } from "./worker.js";
import { Worker, type RequestMeta } from "./worker.js";

/** What one step made for one sequence: a chunk to stream (a token, say), and whether it is finished. */
export interface StepResult<Chunk = unknown> {
  chunk?: Chunk;
  done?: boolean;
}

const OFFLINE: RequestMeta = { requestId: "offline", headers: {}, deadline: Infinity, route: "" };

/**
 * A Worker for models that generate one step at a time (a decoder with a KV cache, an RNN). The
 * server calls {@link step} once for every sequence active on the worker; new requests
 * {@link join} between steps and finished ones {@link leave} at once, so a short request never
 * waits for a long one (continuous batching). The stage option `maxActive` bounds the active
 * sequences. Each sequence streams its chunks as they come.
 *
 * Offline, `forward(input)` generates one input's chunks alone, by the same `join` and `step`.
 *
 * @example
 * ```ts
 * class Countdown extends StepWorker<{ from: number }, { left: number }, { n: number }> {
 *   join(inputs: { from: number }[]) {
 *     return inputs.map((input) => ({ left: input.from }));
 *   }
 *   step(active: { left: number }[]) {
 *     return active.map((seq) => ({ chunk: { n: seq.left-- }, done: seq.left < 0 }));
 *   }
 * }
 * server.appendWorker(Countdown, { maxActive: 16 });
 * ```
 */
export abstract class StepWorker<In = any, State = any, Chunk = any> extends Worker {
  static override streaming: boolean | StreamSettings = true;
  /** Tells the server to drive this Worker by `join` and `step`. */
  static readonly stepwise = true;

  /**
   * Starts a sequence for each input (tokenize, run the prompt through the model): returns one
   * state per input, in order, or an `Error` in place of one to fail that input alone. Called
   * between steps, for every request that arrived meanwhile. Throwing fails those requests only.
   */
  abstract join(inputs: In[], metas: RequestMeta[]): (State | Error)[] | Promise<(State | Error)[]>;

  /**
   * One step of every sequence in `active` (any subset of those joined and not yet finished):
   * returns one result per sequence, in order. Throwing fails those sequences.
   */
  abstract step(active: State[]): StepResult<Chunk>[] | Promise<StepResult<Chunk>[]>;

  /** A sequence has left: finished, failed, or its client gone. Free what it holds here. */
  leave(_state: State): void {}

  async *forward(input: In, meta: RequestMeta = OFFLINE): AsyncGenerator<Chunk> {
    const [state] = await this.join([input], [meta]);
    if (state instanceof Error) throw state;
    try {
      for (;;) {
        const [result] = await this.step([state as State]);
        if (result?.chunk !== undefined) yield result.chunk;
        if (result === undefined || result.done === true) return;
      }
    } finally {
      this.leave(state as State);
    }
  }
}
