/**
 * The queue rules of priority levels, each a pure decision, and the PriorityOrder under a
 * BatchQueue on a fake clock: levels first, earliest deadline first within a level, Triton's
 * queue policies (most queued, a queue timeout that rejects or delays), no level starving, and
 * what a request asks read the same from headers and V2 parameters.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { QueueOutcome } from "../src/metrics/registry.js";
import { BatchQueue } from "../src/scheduling/batch-queue.js";
import { countTake, levelOf, pickLevel, prioritiesOf, type Priorities } from "../src/scheduling/priorities.js";
import { PriorityOrder, queueOrderOf } from "../src/scheduling/priority-order.js";
import { Fifo } from "../src/scheduling/fifo.js";
import { Task, type Reply, type Step } from "../src/scheduling/task.js";
import { requestSchedule } from "../src/serving/request-schedule.js";
import { resolveStageOptions, type PrioritySettings } from "../src/stage-options.js";
import { parseSettings } from "../src/models/settings.js";

const STEPS: readonly Step[] = [];

/** A queue with these settings on a clock the test moves, the answers it gave, and what it counted. */
function setUp(settings: PrioritySettings, maxBatchSize = 1, capacity = 100) {
  const clock = { now: 0 };
  const answers = new Map<string, number>();
  const counted: [QueueOutcome, number][] = [];
  const order = queueOrderOf(settings);
  const queue = new BatchQueue({ policy: { maxBatchSize, maxWaitMs: 0 }, capacity, owner: "stage Test_1", order, wake: () => {}, waited: () => {}, counted: (outcome, level) => counted.push([outcome, level]), now: () => clock.now });
  /** A task named `name` asking `priority`, whose deadline is `timeoutMs` from now. */
  const task = (name: string, priority = 0, timeoutMs = 1000): Task => {
    const reply: Reply = { send: () => answers.set(name, 200), fail: (error) => answers.set(name, error.status), chunk: () => {}, end: () => {}, release: () => {} };
    const t = new Task(STEPS, { requestId: name, headers: {}, deadline: 0, route: "/inference" }, clock.now + timeoutMs, name, undefined, reply);
    t.priority = priority;
    return t;
  };
  /** The names of the tasks that leave, one batch after another, until none is left. */
  const taken = (): string[] => {
    const names: string[] = [];
    for (let batch = queue.next(); batch !== undefined && (batch.length > 0 || queue.queued > 0); batch = queue.next()) names.push(...batch.map((t) => t.payload as string));
    return names;
  };
  return { clock, answers, counted, order, queue, task, taken };
}

describe("priority decisions", () => {
  const two: Priorities = prioritiesOf({ priorityLevels: 2 })!;

  test("no setting keeps first in, first out; any setting makes levels, the lowest the default", () => {
    assert.equal(prioritiesOf({}), undefined);
    assert.ok(queueOrderOf({}) instanceof Fifo);
    assert.ok(queueOrderOf({ priorityLevels: 1 }) instanceof PriorityOrder);
    assert.deepEqual(prioritiesOf({ priorityLevels: 3 }), {
      levels: 3,
      defaultLevel: 3,
      maxOvertakes: 16,
      policies: [0, 1, 2].map(() => ({ maxQueueSize: undefined, defaultTimeoutMs: undefined, timeoutAction: "reject" })),
      tenants: undefined,
    });
    const own = prioritiesOf({ priorityLevels: 2, defaultPriority: 1, queuePolicy: { maxQueueSize: 5 }, priorityQueuePolicy: { "2": { defaultTimeoutMs: 50, timeoutAction: "delay" } } })!;
    assert.equal(own.defaultLevel, 1);
    assert.deepEqual(own.policies, [
      { maxQueueSize: 5, defaultTimeoutMs: undefined, timeoutAction: "reject" },
      { maxQueueSize: 5, defaultTimeoutMs: 50, timeoutAction: "delay" },
    ]);
  });

  test("a request's level: 0 is the default, 1..levels as asked, beyond them refused at entry and the lowest later", () => {
    assert.equal(levelOf(0, two, false), 2);
    assert.equal(levelOf(1, two, false), 1);
    assert.equal(levelOf(2, two, false), 2);
    assert.equal(levelOf(3, two, false), undefined);
    assert.equal(levelOf(3, two, true), 2);
  });

  test("the highest level with work is taken, until a lower one was overtaken maxOvertakes times", () => {
    assert.equal(pickLevel([0, 0, 0], [0, 0, 0], 2), -1);
    assert.equal(pickLevel([0, 4, 1], [0, 0, 0], 2), 1);
    assert.equal(pickLevel([3, 4, 1], [0, 1, 1], 2), 0);
    assert.equal(pickLevel([3, 4, 1], [0, 2, 2], 2), 1, "of two starving levels, the higher first");
    assert.equal(pickLevel([3, 0, 1], [0, 0, 2], 2), 2);
    const overtaken = [0, 0, 0];
    countTake(0, [3, 4, 0], overtaken);
    assert.deepEqual(overtaken, [0, 1, 0], "only a lower level with work waiting counts it");
    countTake(1, [3, 4, 1], overtaken);
    assert.deepEqual(overtaken, [0, 0, 1], "the level taken from starts again");
  });

  test("settings are checked where they are given: a stage's options and a model's settings", () => {
    assert.deepEqual(resolveStageOptions("A_1", { priorityLevels: 2, queuePolicy: { timeoutAction: "DELAY" as "delay" } }).priority, { priorityLevels: 2, queuePolicy: { timeoutAction: "delay" } });
    assert.deepEqual(resolveStageOptions("A_1", {}).priority, {});
    assert.throws(() => resolveStageOptions("A_1", { priorityLevels: 2, defaultPriority: 3 }), /invalid stage A_1: option 'defaultPriority': 3 is not a level of 1..2/);
    assert.throws(() => resolveStageOptions("A_1", { priorityLevels: 2, priorityQueuePolicy: { "3": {} } }), /option 'priorityQueuePolicy.3': not a level of 1..2/);
    assert.throws(() => resolveStageOptions("A_1", { queuePolicy: { timeoutAction: "drop" as "delay" } }), /option 'queuePolicy.timeoutAction'/);
    assert.throws(() => resolveStageOptions("A_1", { priorityLevels: 2, maxOvertakes: 0 }), /option 'maxOvertakes'/);
    const settings = parseSettings({ name: "m", runtime: "onnx", priorityLevels: 2, defaultPriority: 2, priorityQueuePolicy: { "1": { maxQueueSize: 3, defaultTimeoutMs: 20, timeoutAction: "REJECT" } } }, "m/model-settings.json");
    assert.deepEqual(prioritiesOf(settings)!.policies[0], { maxQueueSize: 3, defaultTimeoutMs: 20, timeoutAction: "reject" });
    assert.throws(() => parseSettings({ name: "m", runtime: "onnx", priorityLevels: 0 }, "m/model-settings.json"), /m\/model-settings.json: priorityLevels/);
  });

  test("what a request asks: a whole priority of 0 or more, a timeout above 0 in ms (headers) or µs (V2 parameters)", () => {
    assert.deepEqual(requestSchedule(undefined, undefined, "ms"), { priority: 0, timeoutMs: undefined });
    assert.deepEqual(requestSchedule("1", " 250 ", "ms"), { priority: 1, timeoutMs: 250 });
    assert.deepEqual(requestSchedule(2, 1500, "us"), { priority: 2, timeoutMs: 1.5 });
    assert.deepEqual(requestSchedule("3", "2000000", "us"), { priority: 3, timeoutMs: 2000 });
    assert.throws(() => requestSchedule("high", undefined, "ms"), { status: 400, message: "x-shoal-priority must be a whole number of 0 or more, not 'high'" });
    assert.throws(() => requestSchedule(-1, undefined, "us"), { status: 400, message: "parameters.priority must be a whole number of 0 or more, not number" });
    assert.throws(() => requestSchedule(undefined, "0", "ms"), { status: 400, message: "x-shoal-timeout-ms must be above 0" });
    assert.throws(() => requestSchedule(undefined, ["1", "2"], "ms"), { status: 400, message: "x-shoal-timeout-ms must be a whole number of 0 or more, not several values" });
    assert.throws(() => requestSchedule(true, undefined, "us"), { status: 400 });
  });
});

describe("PriorityOrder under a BatchQueue", () => {
  test("a batch is filled from the highest level first; within a level, earliest deadline first, ties in arrival order", () => {
    const { queue, task, taken } = setUp({ priorityLevels: 3 }, 8);
    for (const [name, priority, timeoutMs] of [["low-a", 3, 1000], ["low-b", 0, 500], ["mid", 2, 1000], ["high-a", 1, 900], ["high-b", 1, 300], ["high-c", 1, 300]] as const) assert.equal(queue.admit(task(name, priority, timeoutMs)), undefined);
    assert.deepEqual(taken(), ["high-b", "high-c", "high-a", "mid", "low-b", "low-a"]);
  });

  test("a priority of no level is refused with 400 at entry, and a task already accepted takes the lowest level", () => {
    const { queue, task, taken } = setUp({ priorityLevels: 2 });
    assert.equal(queue.admit(task("x", 3))?.publicMessage, "bad request: priority 3 is out of range: the levels are 1 (highest) to 2, or 0 for the default (2)");
    assert.equal(queue.queued, 0);
    const later = task("later", 7);
    later.stepIndex = 1;
    const first = task("first", 2);
    queue.admit(first);
    assert.equal(queue.admit(later), undefined);
    assert.deepEqual(taken(), ["first", "later"]);
  });

  test("a level's maxQueueSize refuses one more with 429 at that level only, counted", () => {
    const { queue, task, counted } = setUp({ priorityLevels: 2, priorityQueuePolicy: { "2": { maxQueueSize: 2 } } });
    assert.equal(queue.admit(task("a")), undefined);
    assert.equal(queue.admit(task("b")), undefined);
    assert.equal(queue.admit(task("c"))?.publicMessage, "too many requests: priority level 2 holds 2 requests (its maxQueueSize)");
    assert.equal(queue.admit(task("d", 1)), undefined, "level 1 has room");
    assert.deepEqual(counted, [["full", 2]]);
  });

  test("a queue timeout that rejects answers 408 on time, though no worker pulls, and the rest still leave", async () => {
    const { queue, task, answers, counted, clock, taken } = setUp({ queuePolicy: { defaultTimeoutMs: 5 } });
    queue.admit(task("short"));
    clock.now = 3;
    queue.admit(task("later"));
    clock.now = 6;
    // The queue's timer fires at the first one's due time, on the real clock.
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(answers.get("short"), 408);
    assert.equal(queue.queued, 1);
    assert.deepEqual(taken(), ["later"]);
    assert.deepEqual(counted, [["timeout", 1]]);
  });

  test("a queue timeout that delays puts the task behind its level's others, but ahead of lower levels", () => {
    const { queue, task, clock, counted, taken, answers } = setUp({ priorityLevels: 2, queuePolicy: { defaultTimeoutMs: 10, timeoutAction: "delay" } });
    queue.admit(task("old", 1));
    clock.now = 5;
    queue.admit(task("low", 2));
    clock.now = 8;
    queue.admit(task("new", 1));
    clock.now = 12;
    assert.deepEqual(taken(), ["new", "old", "low"]);
    assert.equal(answers.size, 0, "none is rejected");
    assert.deepEqual(counted, [["delayed", 1]]);
  });

  test("a delayed task whose deadline passes is answered 408 when taken, never sent", () => {
    const { queue, task, clock, answers, counted, taken } = setUp({ queuePolicy: { defaultTimeoutMs: 10, timeoutAction: "delay" } });
    queue.admit(task("a", 0, 50));
    clock.now = 60;
    assert.deepEqual(taken(), []);
    assert.equal(answers.get("a"), 408);
    assert.deepEqual(counted, [["expired", 1]]);
  });

  test("no level starves: a waiting level gets the next place after maxOvertakes tasks of higher levels", () => {
    const { queue, task, taken } = setUp({ priorityLevels: 3, maxOvertakes: 2 });
    for (let i = 0; i < 6; i++) queue.admit(task(`h${i}`, 1));
    queue.admit(task("m0", 2));
    queue.admit(task("m1", 2));
    queue.admit(task("l0", 3));
    // l0 was overtaken by m0 too: its turn comes next.
    assert.deepEqual(taken(), ["h0", "h1", "m0", "l0", "h2", "h3", "m1", "h4", "h5"]);
  });

  test("maxOvertakes 1: the levels that have work take turns", () => {
    const { queue, task, taken } = setUp({ priorityLevels: 3, maxOvertakes: 1 });
    for (const [name, priority] of [["h0", 1], ["h1", 1], ["h2", 1], ["m0", 2], ["m1", 2], ["l0", 3]] as const) queue.admit(task(name, priority));
    assert.deepEqual(taken(), ["h0", "m0", "l0", "h1", "m1", "h2"]);
  });

  test("a task that settles while queued leaves its level at once, from the heap or from the delayed ones", () => {
    const { queue, task, clock, order, taken } = setUp({ priorityLevels: 2, queuePolicy: { defaultTimeoutMs: 10, timeoutAction: "delay" } });
    const tasks = ["a", "b", "c", "d", "e"].map((name, i) => task(name, 1, 1000 - i * 100));
    for (const t of tasks) queue.admit(t);
    tasks[2]!.drop();
    assert.equal((order as PriorityOrder).waitingAt(1), 4);
    clock.now = 20;
    queue.next(() => 0);
    tasks[4]!.drop();
    assert.equal(queue.queued, 3);
    // All were delayed together (due at 10, in arrival order): they leave in the order they were delayed.
    assert.deepEqual(taken(), ["a", "b", "d"]);
  });

  test("randomized against a sorted list: every level in deadline order, those dropped left out", () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const { queue, task, clock } = setUp({ priorityLevels: 3, maxOvertakes: 1000 }, 4, 10_000);
    const expected: { t: Task; level: number; seq: number }[] = [];
    for (let round = 0; round < 400; round++) {
      const priority = Math.floor(random() * 4);
      const t = task(`t${round}`, priority, 100 + Math.floor(random() * 50));
      queue.admit(t);
      expected.push({ t, level: priority === 0 ? 3 : priority, seq: round });
      if (random() < 0.2) expected.splice(Math.floor(random() * expected.length), 1)[0]!.t.drop();
      clock.now += 0.01;
    }
    assert.equal(queue.queued, expected.length);
    const got: string[] = [];
    for (let batch = queue.next(); batch !== undefined && batch.length > 0; batch = queue.next()) got.push(...batch.map((t) => t.payload as string));
    expected.sort((a, b) => a.level - b.level || a.t.deadline - b.t.deadline || a.seq - b.seq);
    assert.deepEqual(got, expected.map((e) => e.t.payload));
  });
});
