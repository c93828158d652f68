/** The batching rule on its own: a pure function of the queue length, the oldest arrival and the clock. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decideBatch, type BatchPolicy } from "../src/scheduling/batcher.js";

const POLICY: BatchPolicy = { maxBatchSize: 4, maxWaitMs: 10 };

describe("decideBatch", () => {
  test("a full batch leaves at once, however young its oldest item", () => {
    assert.deepEqual(decideBatch(4, 100, 100, POLICY), { send: 4 });
  });

  test("more than a batch queued: one full batch leaves, the rest stays for the next worker", () => {
    assert.deepEqual(decideBatch(11, 100, 100, POLICY), { send: 4 });
  });

  test("a partial batch waits until its oldest item has waited maxWaitMs", () => {
    assert.deepEqual(decideBatch(3, 100, 100, POLICY), { wakeAt: 110 });
    assert.deepEqual(decideBatch(3, 100, 109.9, POLICY), { wakeAt: 110 });
  });

  test("the wake-up time follows the oldest item, not the clock", () => {
    assert.deepEqual(decideBatch(2, 100, 105, POLICY), { wakeAt: 110 });
    assert.deepEqual(decideBatch(2, 104, 105, POLICY), { wakeAt: 114 });
  });

  test("at exactly oldest + maxWaitMs, and after, a partial batch leaves with all it holds", () => {
    assert.deepEqual(decideBatch(3, 100, 110, POLICY), { send: 3 });
    assert.deepEqual(decideBatch(1, 100, 5000, POLICY), { send: 1 });
  });

  test("maxBatchSize 1: every item is a full batch and leaves at once", () => {
    const one: BatchPolicy = { maxBatchSize: 1, maxWaitMs: 10 };
    assert.deepEqual(decideBatch(1, 100, 100, one), { send: 1 });
    assert.deepEqual(decideBatch(7, 100, 100, one), { send: 1 });
  });

  test("maxWaitMs 0: a partial batch leaves at once", () => {
    assert.deepEqual(decideBatch(2, 100, 100, { maxBatchSize: 4, maxWaitMs: 0 }), { send: 2 });
  });
});
