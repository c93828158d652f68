/**
 * The queue of a stage or a model, with a fake clock and nobody pulling: what leaves it, when,
 * and that a task which settles while queued leaves at once. And the ring buffer under it.
 */
import assert from "node:assert/strict";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, test } from "node:test";
import { ShoalError } from "../src/errors.js";
import { BatchQueue } from "../src/scheduling/batch-queue.js";
import { Fifo } from "../src/scheduling/fifo.js";
import type { QueueOrder } from "../src/scheduling/queue-order.js";
import { Task, type Reply, type Step } from "../src/scheduling/task.js";

/** No step: a task queued here is at its first step, and the queue never hands it on. */
const STEPS: readonly Step[] = [];
const TIMEOUT_MS = 1000;

/** A queue on a clock the test moves, and the tasks it answered. */
function setUp(capacity = 4, maxBatchSize = 8, maxWaitMs = 10, order: QueueOrder<Task> = new Fifo()) {
  const clock = { now: 0 };
  const answers = new WeakMap<Task, number>();
  const queue = new BatchQueue({ policy: { maxBatchSize, maxWaitMs }, capacity, owner: "stage Test_1", order, wake: () => {}, waited: () => {}, now: () => clock.now });
  const task = (extra?: object): Task => {
    const reply: Reply & { extra?: object } = {
      send: () => answers.set(t, 200),
      fail: (error) => answers.set(t, error.status),
      chunk: () => {},
      end: () => {},
      release: () => {},
      extra,
    };
    const t = new Task(STEPS, { requestId: "r", headers: {}, deadline: 0, route: "/inference" }, clock.now + TIMEOUT_MS, new Uint8Array(1), undefined, reply);
    return t;
  };
  return { clock, answers, queue, task };
}

describe("BatchQueue", () => {
  test("a task that times out while queued leaves at once: depth back down, its room free", () => {
    const { queue, task } = setUp(2);
    const a = task();
    const b = task();
    assert.equal(queue.admit(a), undefined);
    assert.equal(queue.admit(b), undefined);
    assert.equal(queue.admit(task())?.status, 429, "the queue is full");
    a.fail(new ShoalError("TIMEOUT"));
    b.drop();
    assert.equal(queue.queued, 0);
    assert.equal(queue.admit(task()), undefined, "the room is free again");
    assert.equal(queue.queued, 1);
  });

  test("a task that settled while queued is not held by the queue, though no worker ever pulls", async () => {
    const { queue, task } = setUp(4);
    // Made and settled in a function of their own, so that no frame of this one holds them.
    const refs = (() => {
      const tasks = [1, 2, 3].map(() => task({ held: new Uint8Array(1 << 20) }));
      for (const t of tasks) queue.admit(t);
      for (const t of tasks) t.fail(new ShoalError("TIMEOUT"));
      return tasks.map((t) => new WeakRef(t));
    })();
    assert.equal(queue.queued, 0);
    await collectGarbage();
    assert.deepEqual(
      refs.map((r) => r.deref() === undefined),
      [true, true, true],
      "settled tasks are still referenced",
    );
  });

  test("past its deadline a task is answered 408 when a worker pulls, never dispatched", () => {
    const { clock, queue, task, answers } = setUp(4, 2, 10);
    const late = task();
    queue.admit(late);
    clock.now += TIMEOUT_MS / 2;
    const onTime = task();
    queue.admit(onTime);
    clock.now = TIMEOUT_MS;
    assert.deepEqual(queue.next(), [onTime]);
    assert.equal(answers.get(late), 408);
    assert.equal(queue.queued, 0);
  });

  test("a partial batch waits maxWaitMs after its oldest task; a full one leaves at once", () => {
    const { clock, queue, task } = setUp(8, 3, 10);
    const first = task();
    queue.admit(first);
    clock.now += 4;
    const second = task();
    queue.admit(second);
    assert.equal(queue.next(), undefined, "a partial batch waits");
    clock.now += 6;
    assert.deepEqual(queue.next(), [first, second]);
    const batch = [task(), task(), task(), task()];
    for (const t of batch) queue.admit(t);
    assert.deepEqual(queue.next(), batch.slice(0, 3), "a full batch leaves at once");
    assert.equal(queue.queued, 1);
  });

  test("the oldest live task sets the wait once the one ahead of it settled", () => {
    const { clock, queue, task } = setUp(8, 3, 10);
    const gone = task();
    queue.admit(gone);
    clock.now += 8;
    const next = task();
    queue.admit(next);
    gone.drop();
    clock.now += 2;
    assert.equal(queue.next(), undefined, "it has waited 2 ms of its 10");
    clock.now += 8;
    assert.deepEqual(queue.next(), [next]);
  });

  test("tasks leave in the order its owner gave it, and the wait counts from the one that leaves first", () => {
    // Last in, first out: an order of the test's own, to show the seam holds any order.
    const items: Task[] = [];
    const lifo: QueueOrder<Task> = {
      get length() {
        return items.length;
      },
      push: (item) => void items.push(item),
      peek: () => items.at(-1),
      shift: () => items.pop(),
      remove: (item) => items.includes(item) && items.splice(items.indexOf(item), 1).length === 1,
    };
    const { clock, queue, task } = setUp(8, 2, 10, lifo);
    const [a, b, c] = [task(), task(), task()];
    queue.admit(a);
    clock.now = 5;
    queue.admit(b);
    queue.admit(c);
    assert.deepEqual(queue.next(), [c, b], "a full batch leaves at once, newest first");
    clock.now = 9;
    assert.equal(queue.next(), undefined, "a's wait counts from its own arrival, at 0");
    clock.now = 10;
    assert.deepEqual(queue.next(), [a]);
  });

  test("drain hands over every live task, in order", () => {
    const { queue, task } = setUp(8);
    const tasks = [task(), task(), task()];
    for (const t of tasks) queue.admit(t);
    tasks[1]!.drop();
    assert.deepEqual(queue.drain(), [tasks[0], tasks[2]]);
    assert.equal(queue.queued, 0);
    tasks[0]!.fail(new ShoalError("TIMEOUT"));
    assert.equal(queue.queued, 0, "a drained task no longer counts here");
  });
});

describe("Fifo", () => {
  test("push, shift and remove anywhere agree with an array, across wrap-arounds and growth", () => {
    const fifo = new Fifo<number>();
    const model: number[] = [];
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    for (let step = 0, next = 0; step < 20_000; step++) {
      const op = random(10);
      if (op < 5) {
        fifo.push(next);
        model.push(next++);
      } else if (op < 8) {
        assert.equal(fifo.shift(), model.shift());
      } else {
        const item = model.length > 0 && op === 8 ? model[random(model.length)]! : -1;
        const at = model.indexOf(item);
        assert.equal(fifo.remove(item), at >= 0);
        if (at >= 0) model.splice(at, 1);
      }
      assert.equal(fifo.length, model.length);
      assert.equal(fifo.peek(), model[0]);
    }
    while (model.length > 0) assert.equal(fifo.shift(), model.shift());
    assert.equal(fifo.shift(), undefined);
  });
});

// A full collection, after the current job so that WeakRefs read in it may be cleared.
async function collectGarbage(): Promise<void> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  await new Promise((resolve) => setImmediate(resolve));
  gc();
}
