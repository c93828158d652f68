/** Collapsing identical log lines, on a fake clock: what is written, what is counted, and when the count is told. */
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { Collapse } from "../src/logger.js";

const WINDOW_MS = 10_000;

/** A Collapse on the test's fake clock, and the summaries it wrote, as "key: repeats". */
function setUp(t: TestContext) {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  const collapse = new Collapse(WINDOW_MS, () => Date.now());
  const summaries: string[] = [];
  const take = (key: string) => collapse.take(key, (repeats) => summaries.push(`${key}: ${repeats}`));
  return { collapse, summaries, take, tick: (ms: number) => t.mock.timers.tick(ms) };
}

describe("Collapse", () => {
  test("the first line of a window is written, the repeats counted, and their count told once when the window ends", (t) => {
    const { summaries, take, tick } = setUp(t);
    assert.equal(take("a"), true);
    for (let i = 0; i < 812; i++) {
      tick(10);
      assert.equal(take("a"), false);
    }
    tick(WINDOW_MS - 8121);
    assert.deepEqual(summaries, [], "not before the window ends");
    tick(1);
    assert.deepEqual(summaries, ["a: 812"]);
    tick(5 * WINDOW_MS);
    assert.deepEqual(summaries, ["a: 812"], "told once");
  });

  test("a line never repeated has no summary", (t) => {
    const { summaries, take, tick } = setUp(t);
    assert.equal(take("a"), true);
    tick(3 * WINDOW_MS);
    assert.deepEqual(summaries, []);
  });

  test("keys are counted apart", (t) => {
    const { summaries, take, tick } = setUp(t);
    assert.equal(take("a"), true);
    tick(1000);
    assert.equal(take("b"), true);
    assert.equal(take("a"), false);
    assert.equal(take("b"), false);
    assert.equal(take("b"), false);
    tick(WINDOW_MS - 1000);
    assert.deepEqual(summaries, ["a: 1"]);
    tick(1000);
    assert.deepEqual(summaries, ["a: 1", "b: 2"]);
  });

  test("after its window the same line is written again and opens a new one", (t) => {
    const { summaries, take, tick } = setUp(t);
    assert.equal(take("a"), true);
    assert.equal(take("a"), false);
    tick(WINDOW_MS);
    assert.equal(take("a"), true);
    assert.equal(take("a"), false);
    assert.equal(take("a"), false);
    tick(WINDOW_MS);
    assert.deepEqual(summaries, ["a: 1", "a: 2"]);
  });

  test("flush tells every count at once, ended or not, and leaves no timer behind", (t) => {
    const { collapse, summaries, take, tick } = setUp(t);
    take("a");
    take("a");
    tick(5000);
    take("b");
    take("b");
    take("c");
    collapse.flush();
    assert.deepEqual(summaries, ["a: 1", "b: 1"]);
    tick(3 * WINDOW_MS);
    assert.deepEqual(summaries, ["a: 1", "b: 1"]);
    assert.equal(take("a"), true, "a new window after the flush");
  });

  test("past its most open windows, a new line is written and not counted, and the open windows go on", (t) => {
    t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
    const collapse = new Collapse(WINDOW_MS, () => Date.now(), 2);
    const summaries: string[] = [];
    const take = (key: string) => collapse.take(key, (repeats) => summaries.push(`${key}: ${repeats}`));
    assert.equal(take("a"), true);
    assert.equal(take("b"), true);
    assert.equal(take("c"), true);
    assert.equal(take("c"), true, "no window was opened for c");
    assert.equal(take("a"), false);
    t.mock.timers.tick(WINDOW_MS);
    assert.deepEqual(summaries, ["a: 1"]);
    assert.equal(take("c"), true);
    assert.equal(take("c"), false, "room again once the windows ended");
  });
});
