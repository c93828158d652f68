/**
 * What a worker does when `forward()` fails a batch of several items as a whole: one item may be
 * at fault (a client's value its runtime cannot take), and a batch is a list of independent
 * requests, so the batch is run again in halves to find it.
 *
 * The rule: a failed part of two or more items is split in two halves (the first one the
 * larger), which run one after the other. A half that succeeds keeps its answers; a half that
 * fails is split again, down to single items, each of which then gets its own error. But when
 * both halves fail the same way ({@link sameFailure}), the failure is the batch's, not an item's
 * (a broken model fails whatever it is given), and the split stops: every item of the part gets
 * that error. A single item at fault in a batch of n costs 2·⌈log2 n⌉ runs more; a model that
 * fails everything, two. An item whose deadline has passed is not run again.
 */
import { ShoalError } from "../errors.js";
import type { RequestMeta } from "../worker.js";

/** The outcome of a split: the output (or `Error`) of each item, by index, and the runs it made. */
export interface Split {
  outputs: unknown[];
  runs: number;
}

/**
 * Runs the items of a batch that `forward()` failed as a whole again, in parts, as the rule
 * above says. `run` is `forward()` on the items at the given indexes: it resolves with one output
 * per index, in order, or rejects when it fails them all. `deadlines` are the items' deadlines,
 * in ms on the clock of `now` (`Date.now()`, as an item's `meta.deadline`).
 */
export async function splitFailedBatch(count: number, run: (at: number[]) => Promise<unknown[]>, deadlines: readonly number[], now: () => number = Date.now): Promise<Split> {
  const outputs: unknown[] = new Array(count);
  let runs = 0;

  // Runs the items of `at` still within their deadline: their outputs, or the failure of them all.
  const attempt = async (at: number[]): Promise<Attempt> => {
    const time = now();
    const live = at.filter((i) => {
      if (deadlines[i]! > time) return true;
      outputs[i] = new ShoalError("TIMEOUT", "the deadline passed while its batch was run again in parts");
      return false;
    });
    if (live.length === 0) return { at: live, failed: false };
    runs++;
    try {
      const results = await run(live);
      live.forEach((i, j) => (outputs[i] = results[j]));
      return { at: live, failed: false };
    } catch (failure) {
      return { at: live, failed: true, failure };
    }
  };

  // `at` failed as a whole: its halves run, and a failed half is split again.
  const split = async (at: number[]): Promise<void> => {
    const middle = Math.ceil(at.length / 2);
    const first = await attempt(at.slice(0, middle));
    const second = await attempt(at.slice(middle));
    const shared = first.failed && second.failed && sameFailure(first.failure, second.failure);
    for (const half of [first, second]) {
      if (!half.failed) continue;
      if (shared || half.at.length === 1) for (const i of half.at) outputs[i] = asError(half.failure);
      else await split(half.at);
    }
  };

  await split(Array.from({ length: count }, (_, i) => i));
  return { outputs, runs };
}

// One run of a part of the batch: the items it held (those still within their deadline), and
// whether it failed them all, with what.
interface Attempt {
  at: number[];
  failed: boolean;
  failure?: unknown;
}

/**
 * Runs a batch that `forward` failed as a whole again in parts ({@link splitFailedBatch}), each
 * part with its items' inputs and metas; a part whose results are not one per item fails.
 */
export function splitBatch(forward: (inputs: unknown[], metas: RequestMeta[]) => unknown, inputs: readonly unknown[], metas: readonly RequestMeta[]): Promise<Split> {
  const run = async (at: number[]) => {
    const outputs = await forward(at.map((i) => inputs[i]), at.map((i) => metas[i]!));
    const miscount = countError(outputs, at.length);
    if (miscount !== undefined) throw new Error(miscount);
    return outputs as unknown[];
  };
  return splitFailedBatch(inputs.length, run, metas.map((meta) => meta.deadline));
}

/** What is wrong with `forward()`'s results for a batch of `n`, when they are not one per item. */
export function countError(outputs: unknown, n: number): string | undefined {
  if (Array.isArray(outputs) && outputs.length === n) return undefined;
  const got = Array.isArray(outputs) ? `an array of ${outputs.length}` : typeof outputs;
  return `forward() returned ${got} for a batch of ${n}; it must return one result per item, in order`;
}

/**
 * Whether two failures are the same: errors of one kind (a Shoal error's code, another's class)
 * with the same message. Two parts of a batch that fail the same way fail for a cause they share.
 */
export function sameFailure(a: unknown, b: unknown): boolean {
  if (!(a instanceof Error) || !(b instanceof Error)) return !(a instanceof Error) && !(b instanceof Error) && String(a) === String(b);
  const kind = (e: Error) => (e instanceof ShoalError ? e.code : e.name);
  return a.constructor === b.constructor && kind(a) === kind(b) && a.message === b.message;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
