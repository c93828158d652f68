/**
 * The ring buffer under every queue, case by case: order, removal anywhere, reuse, growth and
 * wrap-around. Its randomized comparison with an array is in batch-queue.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Fifo } from "../src/scheduling/fifo.js";

/** A queue holding `items`, oldest first. */
function fifoOf<T>(...items: T[]): Fifo<T> {
  const fifo = new Fifo<T>();
  for (const item of items) fifo.push(item);
  return fifo;
}

/** Empties `fifo`, oldest first. */
function drain<T>(fifo: Fifo<T>): T[] {
  const out: T[] = [];
  for (let item = fifo.shift(); item !== undefined; item = fifo.shift()) out.push(item);
  return out;
}

describe("Fifo", () => {
  test("empty: length 0, and peek and shift give undefined", () => {
    const fifo = new Fifo<string>();
    assert.equal(fifo.length, 0);
    assert.equal(fifo.peek(), undefined);
    assert.equal(fifo.shift(), undefined);
    assert.equal(fifo.length, 0, "shifting an empty queue leaves it empty");
  });

  test("first in, first out; peek shows the oldest without taking it", () => {
    const fifo = fifoOf("a", "b", "c");
    assert.equal(fifo.length, 3);
    assert.equal(fifo.peek(), "a");
    assert.equal(fifo.length, 3);
    assert.equal(fifo.shift(), "a");
    assert.equal(fifo.peek(), "b");
    assert.deepEqual(drain(fifo), ["b", "c"]);
  });

  test("remove takes an item out of the middle, the head or the tail, keeping the others' order", () => {
    const middle = fifoOf(1, 2, 3, 4, 5);
    assert.equal(middle.remove(3), true);
    assert.equal(middle.length, 4);
    assert.deepEqual(drain(middle), [1, 2, 4, 5]);

    const head = fifoOf(1, 2, 3);
    assert.equal(head.remove(1), true);
    assert.equal(head.peek(), 2, "the next one is the head now");
    assert.deepEqual(drain(head), [2, 3]);

    const tail = fifoOf(1, 2, 3);
    assert.equal(tail.remove(3), true);
    tail.push(4);
    assert.deepEqual(drain(tail), [1, 2, 4], "a push after removing the tail goes last");
  });

  test("remove of an item not there is false and changes nothing", () => {
    const fifo = fifoOf(1, 2);
    assert.equal(fifo.remove(7), false);
    assert.equal(fifo.length, 2);
    assert.equal(new Fifo<number>().remove(1), false);
    assert.deepEqual(drain(fifo), [1, 2]);
  });

  test("remove takes one occurrence, the oldest, of an item queued twice", () => {
    const a = { id: "a" };
    const b = { id: "b" };
    const fifo = fifoOf(a, b, a);
    assert.equal(fifo.remove(a), true);
    assert.deepEqual(drain(fifo), [b, a]);
  });

  test("removing the only item empties the queue", () => {
    const fifo = fifoOf("x");
    assert.equal(fifo.remove("x"), true);
    assert.equal(fifo.length, 0);
    assert.equal(fifo.peek(), undefined);
  });

  test("a queue emptied is used again as new, by shift and by remove", () => {
    const fifo = fifoOf(1, 2, 3);
    drain(fifo);
    fifo.push(4);
    fifo.push(5);
    assert.equal(fifo.peek(), 4);
    assert.equal(fifo.remove(4), true);
    assert.equal(fifo.remove(5), true);
    assert.equal(fifo.length, 0);
    fifo.push(6);
    assert.deepEqual(drain(fifo), [6]);
  });

  test("many items: it grows past its first capacity, in order, and from a head that has moved", () => {
    const fifo = new Fifo<number>();
    // Move the head off the start of the buffer, so that growth must unwrap it.
    for (let i = 0; i < 10; i++) fifo.push(-1);
    for (let i = 0; i < 10; i++) fifo.shift();
    for (let i = 0; i < 10_000; i++) fifo.push(i);
    assert.equal(fifo.length, 10_000);
    assert.equal(fifo.peek(), 0);
    assert.equal(fifo.remove(5_000), true);
    const out = drain(fifo);
    assert.equal(out.length, 9_999);
    assert.deepEqual(out, Array.from({ length: 10_000 }, (_, i) => i).filter((i) => i !== 5_000));
  });
});
