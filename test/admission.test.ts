/**
 * What a BatchQueue lets in, what it answers itself when a worker pulls, and when it wakes its
 * owner, on a clock the test moves. The queue needs little of a task, so a small stand-in plays
 * one here. What leaves and when, and tasks settling while queued, are in batch-queue.test.ts;
 * the batching rule alone in batcher.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import type { ShoalError } from "../src/errors.js";
import { BatchQueue } from "../src/scheduling/batch-queue.js";
import { Fifo } from "../src/scheduling/fifo.js";
import type { Task } from "../src/scheduling/task.js";

/** What the queue reads and writes of a task. */
type Queued = Pick<Task, "ingress" | "deadline" | "enqueuedAt" | "queuedIn" | "fail">;

const TIMEOUT_MS = 1000;

/** A queue on a clock the test moves; the tasks it answered itself, the waits it recorded, the times it woke its owner. */
function setUp({ capacity = 8, maxBatchSize = 4, maxWaitMs = 10 } = {}) {
  const clock = { now: 0 };
  const woken = { count: 0 };
  const waits: number[] = [];
  const answers = new Map<Task, ShoalError>();
  const queue = new BatchQueue({ policy: { maxBatchSize, maxWaitMs }, capacity, owner: "stage Test_1", order: new Fifo(), wake: () => woken.count++, waited: (ms) => waits.push(ms), now: () => clock.now });
  /** A task at its route's first stage unless `ingress` is false; its deadline TIMEOUT_MS from now unless given. */
  const task = ({ ingress = true, deadline = clock.now + TIMEOUT_MS } = {}): Task => {
    const queued: Queued = { ingress, deadline, enqueuedAt: 0, queuedIn: null, fail: (error) => answers.set(t, error) };
    const t = queued as Task;
    return t;
  };
  return { clock, woken, waits, answers, queue, task };
}

describe("admission", () => {
  test("tasks entering their route are queued up to capacity, then refused with 429 naming the queue", () => {
    const { queue, task } = setUp({ capacity: 2 });
    assert.equal(queue.admit(task()), undefined);
    assert.equal(queue.admit(task()), undefined);
    const refused = task();
    const error = queue.admit(refused);
    assert.equal(error?.status, 429);
    assert.match(error.message, /the queue of stage Test_1 is full/);
    assert.equal(queue.queued, 2);
    assert.equal(refused.queuedIn, null, "a refused task is not held");
  });

  test("a task from an earlier stage was already accepted: it is queued even past capacity", () => {
    const { queue, task } = setUp({ capacity: 1 });
    assert.equal(queue.admit(task()), undefined);
    assert.equal(queue.admit(task({ ingress: false })), undefined);
    assert.equal(queue.admit(task({ ingress: false })), undefined);
    assert.equal(queue.queued, 3);
    assert.equal(queue.admit(task())?.status, 429, "a new request is still refused");
  });

  test("a queued task carries its arrival on the queue's clock and the queue that holds it", () => {
    const { clock, queue, task } = setUp();
    clock.now = 42;
    const t = task();
    queue.admit(t);
    assert.equal(t.enqueuedAt, 42);
    assert.equal(t.queuedIn, queue);
  });

  test("capacity counts tasks waiting: those a worker took free their room", () => {
    const { queue, task } = setUp({ capacity: 2, maxBatchSize: 2 });
    queue.admit(task());
    queue.admit(task());
    assert.equal(queue.next()?.length, 2);
    assert.equal(queue.queued, 0);
    assert.equal(queue.admit(task()), undefined);
  });
});

describe("deadlines when a worker pulls", () => {
  test("tasks past their deadline are answered 408 and take no place in the batch", () => {
    const { clock, queue, task, answers } = setUp({ maxBatchSize: 2 });
    const late = [task({ deadline: 50 }), task({ deadline: 50 })];
    const live = [task(), task(), task()];
    for (const t of [late[0]!, live[0]!, late[1]!, live[1]!, live[2]!]) queue.admit(t);
    clock.now = 100;
    assert.deepEqual(queue.next(), live.slice(0, 2));
    assert.deepEqual(
      late.map((t) => answers.get(t)?.status),
      [408, 408],
    );
    assert.equal(answers.size, 2, "the tasks taken are not answered by the queue");
    assert.equal(queue.queued, 1);
    assert.deepEqual(late.map((t) => t.queuedIn), [null, null]);
  });

  test("a deadline that is exactly now has passed", () => {
    const { clock, queue, task, answers } = setUp({ maxBatchSize: 1 });
    const t = task({ deadline: 10 });
    queue.admit(t);
    clock.now = 10;
    assert.deepEqual(queue.next(), []);
    assert.equal(answers.get(t)?.status, 408);
  });

  test("when every task taken is past its deadline the batch is empty, and the queue is empty after it", () => {
    const { clock, queue, task } = setUp({ maxBatchSize: 2 });
    queue.admit(task({ deadline: 5 }));
    queue.admit(task({ deadline: 5 }));
    clock.now = 20;
    assert.deepEqual(queue.next(), [], "nothing to dispatch, though the batch was full");
    assert.equal(queue.next(), undefined);
  });

  test("the wait is recorded for the tasks dispatched, not for those answered 408", () => {
    const { clock, queue, task, waits } = setUp({ maxBatchSize: 4, maxWaitMs: 10 });
    queue.admit(task({ deadline: 15 }));
    clock.now = 5;
    queue.admit(task());
    clock.now = 20;
    assert.equal(queue.next()?.length, 1);
    assert.deepEqual(waits, [15]);
  });
});

describe("waking the owner", () => {
  // Both clocks move together: the queue's own, and the timers'.
  function fakeTime(t: TestContext, clock: { now: number }): (ms: number) => void {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    return (ms) => {
      clock.now += ms;
      t.mock.timers.tick(ms);
    };
  }

  test("a partial batch wakes its owner once, when its oldest task has waited maxWaitMs", (t) => {
    const { clock, woken, queue, task } = setUp({ maxBatchSize: 4, maxWaitMs: 10 });
    const advance = fakeTime(t, clock);
    const first = task();
    queue.admit(first);
    assert.equal(queue.next(), undefined);
    advance(9);
    assert.equal(woken.count, 0);
    advance(1);
    assert.equal(woken.count, 1);
    assert.deepEqual(queue.next(), [first]);
    advance(1000);
    assert.equal(woken.count, 1, "no wake-up once the batch left");
  });

  test("asking again while a partial batch waits sets no second timer", (t) => {
    const { clock, woken, queue, task } = setUp({ maxBatchSize: 4, maxWaitMs: 10 });
    const advance = fakeTime(t, clock);
    queue.admit(task());
    assert.equal(queue.next(), undefined);
    advance(3);
    queue.admit(task());
    assert.equal(queue.next(), undefined, "the oldest has waited 3 ms of its 10");
    advance(7);
    assert.equal(woken.count, 1);
    advance(1000);
    assert.equal(woken.count, 1);
  });

  test("admitting alone sets no timer: the owner asks for a batch after admitting", (t) => {
    const { clock, woken, queue, task } = setUp();
    const advance = fakeTime(t, clock);
    queue.admit(task());
    advance(1000);
    assert.equal(woken.count, 0);
  });

  test("a full batch leaves without a timer", (t) => {
    const { clock, woken, queue, task } = setUp({ maxBatchSize: 2, maxWaitMs: 10 });
    const advance = fakeTime(t, clock);
    queue.admit(task());
    queue.admit(task());
    assert.equal(queue.next()?.length, 2);
    advance(1000);
    assert.equal(woken.count, 0);
  });

  test("when the oldest task left early, the wake-up comes early and the next ask sets one for the new oldest", (t) => {
    const { clock, woken, queue, task } = setUp({ maxBatchSize: 4, maxWaitMs: 10 });
    const advance = fakeTime(t, clock);
    const gone = task();
    queue.admit(gone);
    assert.equal(queue.next(), undefined);
    advance(5);
    const next = task();
    queue.admit(next);
    queue.unqueue(gone);
    advance(5);
    assert.equal(woken.count, 1);
    assert.equal(queue.next(), undefined, "the new oldest has waited 5 ms of its 10");
    advance(4);
    assert.equal(woken.count, 1);
    advance(1);
    assert.equal(woken.count, 2);
    assert.deepEqual(queue.next(), [next]);
  });
});
