/** How a batch that forward() failed as a whole is run again in parts (src/workers/batch-split.ts), with a fake forward and clock. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ClientError, ShoalError, ValidationError } from "../src/errors.js";
import { countError, sameFailure, splitBatch, splitFailedBatch } from "../src/workers/batch-split.js";
import type { RequestMeta } from "../src/worker.js";

const NO_DEADLINE = (n: number) => new Array<number>(n).fill(Infinity);

/** A forward() on item indexes that fails a run holding any of `bad`, and records each run. */
function model(bad: readonly number[], failure: (at: number[]) => unknown = () => new Error("the run failed")) {
  const runs: number[][] = [];
  const run = async (at: number[]) => {
    runs.push(at);
    if (at.some((i) => bad.includes(i))) throw failure(at);
    return at.map((i) => ({ y: i * 2 }));
  };
  return { runs, run };
}

describe("splitting a batch that failed as a whole", () => {
  test("one item at fault in 16: the others get their outputs, it gets the error, in 2·log2(16) runs", async () => {
    const { runs, run } = model([5]);
    const { outputs, runs: count } = await splitFailedBatch(16, run, NO_DEADLINE(16));
    outputs.forEach((output, i) => (i === 5 ? assert.ok(output instanceof Error && output.message === "the run failed") : assert.deepEqual(output, { y: i * 2 })));
    assert.equal(count, 8);
    assert.deepEqual(runs.map((at) => at.length), [8, 8, 4, 4, 2, 2, 1, 1]);
  });

  test("a failure that both halves share is the batch's: the split stops after two runs, every item gets the error", async () => {
    const { runs, run } = model([...Array(16).keys()]);
    const { outputs, runs: count } = await splitFailedBatch(16, run, NO_DEADLINE(16));
    assert.equal(count, 2);
    assert.deepEqual(runs, [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]);
    for (const output of outputs) assert.ok(output instanceof Error && output.message === "the run failed");
  });

  test("halves that fail differently are split further, and never take more than 2n - 2 runs", async () => {
    // Each run names its first item: no two parts fail the same way.
    const { runs, run } = model([...Array(16).keys()], (at) => new Error(`item ${at[0]} is bad`));
    const { outputs, runs: count } = await splitFailedBatch(16, run, NO_DEADLINE(16));
    assert.equal(count, 30);
    assert.equal(runs.length, 30);
    outputs.forEach((output, i) => assert.equal((output as Error).message, `item ${i} is bad`));
  });

  test("two items at fault in different halves both get their own errors", async () => {
    const { run } = model([2, 13], (at) => new Error(`bad ${at.find((i) => i === 2 || i === 13)}`));
    const { outputs } = await splitFailedBatch(16, run, NO_DEADLINE(16));
    outputs.forEach((output, i) => (i === 2 || i === 13 ? assert.equal((output as Error).message, `bad ${i}`) : assert.deepEqual(output, { y: i * 2 })));
  });

  test("an odd batch splits with the larger half first; Errors a part returns at an index stay that item's", async () => {
    const runs: number[][] = [];
    const run = async (at: number[]) => {
      runs.push(at);
      if (at.includes(0) && at.length > 1) throw new Error("together, they fail");
      return at.map((i) => (i === 1 ? new ValidationError("item 1 is invalid") : i));
    };
    const { outputs } = await splitFailedBatch(3, run, NO_DEADLINE(3));
    assert.deepEqual(runs, [[0, 1], [2], [0], [1]]);
    assert.equal(outputs[0], 0);
    assert.ok(outputs[1] instanceof ValidationError);
    assert.equal(outputs[2], 2);
  });

  test("an item whose deadline has passed is not run again: it gets a 408, the others go on", async () => {
    let now = 0;
    const runs: number[][] = [];
    const run = async (at: number[]) => {
      runs.push(at);
      now += 150;
      if (at.includes(0)) throw new Error("item 0 is bad");
      return at.map((i) => i);
    };
    const { outputs, runs: count } = await splitFailedBatch(4, run, [1000, 1000, 100, 1000], () => now);
    // Item 2's deadline passed during the first half's run.
    assert.deepEqual(runs, [[0, 1], [3], [0], [1]]);
    assert.equal(count, 4);
    assert.ok(outputs[2] instanceof ShoalError && outputs[2].code === "TIMEOUT");
    assert.deepEqual([outputs[1], outputs[3]], [1, 3]);
    assert.equal((outputs[0] as Error).message, "item 0 is bad");
  });

  test("a batch whose deadlines have all passed is not run at all", async () => {
    const { runs, run } = model([0]);
    const { outputs, runs: count } = await splitFailedBatch(4, run, [5, 5, 5, 5], () => 10);
    assert.equal(count, 0);
    assert.deepEqual(runs, []);
    for (const output of outputs) assert.equal((output as ShoalError).code, "TIMEOUT");
  });

  test("a part whose forward() returns the wrong number of results fails like a throw", async () => {
    const metas = Array.from({ length: 4 }, (_, i): RequestMeta => ({ requestId: `r${i}`, headers: {}, deadline: Infinity, route: "/" }));
    const forward = (inputs: unknown[], got: RequestMeta[]) => {
      assert.equal(got.length, inputs.length);
      const outputs = inputs.map((x) => (x as number) * 10);
      return inputs.length > 1 && inputs.includes(1) ? outputs.slice(1) : outputs;
    };
    const { outputs, runs } = await splitBatch(forward, [1, 2, 3, 4], metas);
    assert.deepEqual(outputs, [10, 20, 30, 40]);
    assert.equal(runs, 4);
  });
});

test("forward()'s results are counted against the batch", () => {
  assert.equal(countError([1, 2], 2), undefined);
  assert.equal(countError([1], 2), "forward() returned an array of 1 for a batch of 2; it must return one result per item, in order");
  assert.equal(countError(undefined, 1), "forward() returned undefined for a batch of 1; it must return one result per item, in order");
});

test("two failures are the same when they are of one kind, with one message", () => {
  assert.ok(sameFailure(new Error("out of range"), new Error("out of range")));
  assert.ok(!sameFailure(new Error("idx=99 out of range"), new Error("idx=77 out of range")));
  assert.ok(!sameFailure(new Error("boom"), new TypeError("boom")));
  assert.ok(sameFailure(new ShoalError("SERVER", "no device"), new ShoalError("SERVER", "no device")));
  assert.ok(!sameFailure(new ShoalError("SERVER", "x"), new ShoalError("INTERNAL", "x")));
  assert.ok(!sameFailure(new ClientError("x"), new Error("x")));
  assert.ok(sameFailure("a string thrown", "a string thrown"));
  assert.ok(!sameFailure("boom", new Error("boom")));
});
