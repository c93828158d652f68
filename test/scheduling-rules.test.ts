/**
 * The scheduling rules after priorities, each a pure decision, and under a BatchQueue on a fake
 * clock: the latency model and admission by predicted latency, the wait "auto" chooses and
 * preferred batch sizes, fair sharing between tenants inside a level, and where a request names
 * its tenant.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { QueueOutcome, TenantOutcome } from "../src/metrics/registry.js";
import { BatchQueue } from "../src/scheduling/batch-queue.js";
import { decideBatch } from "../src/scheduling/batcher.js";
import { activate, charge, pickShare, TenantKeys } from "../src/scheduling/fair-share.js";
import { autoWaitMs, LatencyModel, MIN_BATCHES, predictMs, Presence, retryAfter, ReturnLag } from "../src/scheduling/latency-model.js";
import { queueOrderOf } from "../src/scheduling/priority-order.js";
import { bucketOf } from "../src/scheduling/length-buckets.js";
import { modelSettingsSchema } from "../src/models/settings.js";
import { resolveStageOptions } from "../src/stage-options.js";
import { Task, type Reply } from "../src/scheduling/task.js";
import { tenantOf } from "../src/serving/request-schedule.js";
import { parseTenantKey } from "../src/config.js";
import { cacheAllowed, cacheKey, ResponseCache } from "../src/scheduling/response-cache.js";
import type { PrioritySettings } from "../src/stage-options.js";
import type { BatchPolicy } from "../src/scheduling/batcher.js";

/** A model that has seen batches of forward time 10 ms + 2 ms an item. */
function fitted(fixedMs = 10, perItemMs = 2): LatencyModel {
  const model = new LatencyModel();
  for (const size of [1, 4, 8, 2, 16, 8]) model.observe(size, fixedMs + perItemMs * size);
  return model;
}

/** A queue on a clock the test moves, with what it answered and counted. */
function setUp(settings: PrioritySettings, policy: BatchPolicy, workers = () => 1, sizeOf?: (item: unknown) => number) {
  const clock = { now: 0 };
  const answers = new Map<string, { status: number; retryAfter: number | undefined }>();
  const counted: QueueOutcome[] = [];
  const tenants: [string, TenantOutcome][] = [];
  const predicted: [number, number][] = [];
  const waits: number[] = [];
  const queue = new BatchQueue({
    policy,
    capacity: 10_000,
    owner: "stage Test_1",
    order: queueOrderOf(settings),
    wake: () => {},
    waited: () => {},
    counted: (outcome) => counted.push(outcome),
    now: () => clock.now,
    workers,
    predict: settings.predictAdmission,
    predicted: (p, a) => predicted.push([p, a]),
    waitChosen: (ms) => waits.push(ms),
    tenantCounted: (share, outcome) => tenants.push([share, outcome]),
    sizeOf,
  });
  const task = (name: string, timeoutMs = 1000, tenant = ""): Task => {
    const reply: Reply = { send: () => answers.set(name, { status: 200, retryAfter: undefined }), fail: (e) => answers.set(name, { status: e.status, retryAfter: e.retryAfterS }), chunk: () => {}, end: () => {}, release: () => {} };
    const t = new Task([], { requestId: name, headers: {}, deadline: 0, route: "/inference" }, clock.now + timeoutMs, name, undefined, reply);
    t.tenant = tenant;
    return t;
  };
  return { clock, answers, counted, tenants, predicted, waits, queue, task };
}

describe("the latency model", () => {
  test("it fits a fixed part and a part per item from batches of several sizes, with five numbers", () => {
    const model = fitted(10, 2);
    assert.ok(Math.abs(model.fixedMs - 10) < 1e-6 && Math.abs(model.perItemMs - 2) < 1e-6, `${model.fixedMs} + ${model.perItemMs}/item`);
    assert.ok(Math.abs(model.forwardMs(32) - 74) < 1e-6);
  });

  test("it is not ready before MIN_BATCHES batches; from one size only it takes the time as proportional", () => {
    const model = new LatencyModel();
    for (let i = 0; i < MIN_BATCHES - 1; i++) model.observe(8, 40);
    assert.equal(model.ready, false);
    model.observe(8, 40);
    assert.equal(model.ready, true);
    assert.equal(model.forwardMs(8), 40);
    assert.equal(model.forwardMs(2), 10, "an underestimate for small batches: it errs towards admitting");
  });

  test("it follows a change: old batches weigh less", () => {
    const model = fitted(10, 2);
    for (let i = 0; i < 200; i++) model.observe(i % 2 === 0 ? 4 : 8, i % 2 === 0 ? 24 : 44);
    assert.ok(Math.abs(model.forwardMs(8) - 44) < 0.5, `${model.forwardMs(8)}`);
  });

  test("the prediction counts the rounds of batches ahead, workers at a time; a late one gets Retry-After in whole seconds", () => {
    const model = fitted(10, 2);
    // 99 ahead + itself, batches of 10 on 2 workers: 5 rounds of 30 ms.
    assert.ok(Math.abs(predictMs(model, { ahead: 99, workers: 2, maxBatchSize: 10 }) - 150) < 1e-9);
    assert.ok(Math.abs(predictMs(model, { ahead: 0, workers: 1, maxBatchSize: 10 }) - 12) < 1e-9, "alone: a batch of one");
    assert.equal(retryAfter(150, 0, 200), undefined);
    assert.equal(retryAfter(150, 0, 100), 1);
    assert.equal(retryAfter(5000, 0, 1500), 4);
  });
});

describe("admission by predicted latency under a BatchQueue", () => {
  test("a request predicted to miss its deadline is refused at once with 429 and Retry-After; others carry their prediction", () => {
    const q = setUp({ predictAdmission: true }, { maxBatchSize: 4, maxWaitMs: 0 });
    // Teach it 20 ms a batch of 4 (5 ms an item, proportional).
    for (let i = 0; i < MIN_BATCHES; i++) q.queue.landed([q.task(`warm${i}`)].concat([1, 2, 3].map((j) => q.task(`w${i}-${j}`))), 20);
    for (let i = 0; i < 20; i++) assert.equal(q.queue.admit(q.task(`a${i}`, 1000)), undefined);
    // 20 ahead + itself: 6 rounds of 20 ms = 120 ms, past a deadline of 100 ms.
    const refused = q.queue.admit(q.task("late", 100));
    assert.equal(refused?.status, 429);
    assert.equal(refused?.retryAfterS, 1);
    assert.match(refused!.publicMessage, /^too many requests: stage Test_1 would answer in about 120 ms, after the request's deadline$/);
    assert.deepEqual(q.counted, ["shed"]);
    assert.equal(q.queue.admit(q.task("fits", 200)), undefined);
    assert.equal(q.queue.queued, 21);
    // The prediction and the real figure, once its batch is back.
    const batch = q.queue.next()!;
    q.clock.now = 25;
    q.queue.landed(batch, 25);
    // Each was predicted with those ahead of it when it came: alone a batch of one (5 ms), then 2, 3 and 4.
    assert.deepEqual(q.predicted, [[5, 25], [10, 25], [15, 25], [20, 25]]);
  });

  test("a queue that predicts never sends a task its batch cannot finish in time for: 408, never computed", () => {
    const q = setUp({ predictAdmission: true }, { maxBatchSize: 4, maxWaitMs: 0 });
    for (let i = 0; i < MIN_BATCHES; i++) q.queue.landed([q.task(`w${i}`)], 20);
    q.queue.admit(q.task("tight", 30));
    q.queue.admit(q.task("roomy", 1000));
    q.clock.now = 15;
    // 15 ms left of "tight", and a batch of 2 takes about 40.
    assert.deepEqual(q.queue.next()!.map((t) => t.payload), ["roomy"]);
    assert.equal(q.answers.get("tight")?.status, 408);
    assert.deepEqual(q.counted, ["expired"]);
  });

  test("while no worker is up it is a 503; a queue that does not predict, or has not learnt yet, admits", () => {
    const q = setUp({ predictAdmission: true }, { maxBatchSize: 1, maxWaitMs: 0 }, () => 0);
    for (let i = 0; i < MIN_BATCHES; i++) q.queue.landed([q.task(`w${i}`)], 50);
    q.queue.admit(q.task("a"));
    assert.equal(q.queue.admit(q.task("b", 60))?.status, 503);
    const plain = setUp({}, { maxBatchSize: 1, maxWaitMs: 0 });
    for (let i = 0; i < MIN_BATCHES; i++) plain.queue.landed([plain.task(`w${i}`)], 50);
    for (let i = 0; i < 5; i++) assert.equal(plain.queue.admit(plain.task(`p${i}`, 60)), undefined);
    const fresh = setUp({ predictAdmission: true }, { maxBatchSize: 1, maxWaitMs: 0 });
    for (let i = 0; i < 5; i++) assert.equal(fresh.queue.admit(fresh.task(`f${i}`, 1)), undefined);
  });
});

/**
 * `clients` that each send again `lagMs(i)` after their answer (the i-th of its batch), to an
 * queue ("auto" unless `maxWaitMs` says) on a fake clock whose one worker takes 10 ms + 2 ms an
 * item, in 0.05 ms steps, until `batches` were sent: their sizes and start times, the waits
 * chosen, and the items served an ms over the second half of the batches.
 */
function closedLoop(clients: number, maxBatchSize: number, lagMs: (i: number) => number, batches: number, maxWaitMs: BatchPolicy["maxWaitMs"] = "auto") {
  const clock = { now: 0 };
  const waits: number[] = [];
  let running = 0;
  const policy: BatchPolicy = { maxBatchSize, maxWaitMs };
  const queue = new BatchQueue({ policy, capacity: 100, owner: "stage T_1", order: queueOrderOf({}), wake: () => {}, waited: () => {}, now: () => clock.now, running: () => running, waitChosen: (ms) => waits.push(ms) });
  const task = (name: string) => new Task([], { requestId: name, headers: {}, deadline: 0, route: "/inference" }, clock.now + 10_000, name, undefined, { send: () => {}, fail: () => {}, chunk: () => {}, end: () => {}, release: () => {} });
  for (let i = 0; i < MIN_BATCHES; i++) queue.landed(Array.from({ length: 2 ** i }, (_, j) => task(`w${i}-${j}`)), 10 + 2 * 2 ** i);
  const sendAt = Array.from({ length: clients }, (_, i) => 0.1 * i);
  const sizes: number[] = [];
  const starts: number[] = [];
  let batch: Task[] = [];
  let busyUntil = 0;
  for (let step = 0; step < 400_000 && sizes.length < batches; step++) {
    clock.now = step * 0.05;
    if (batch.length > 0 && clock.now >= busyUntil) {
      queue.landed(batch, 10 + 2 * batch.length);
      batch.forEach((t, i) => (sendAt[Number(String(t.payload).slice(1))] = clock.now + lagMs(i)));
      batch = [];
      running = 0;
    }
    sendAt.forEach((at, client) => {
      if (at > clock.now) return;
      queue.admit(task(`c${client}`));
      sendAt[client] = Infinity;
    });
    if (batch.length > 0) continue;
    batch = queue.next() ?? [];
    running = batch.length;
    busyUntil = clock.now + 10 + 2 * batch.length;
    if (batch.length === 0) continue;
    sizes.push(batch.length);
    starts.push(clock.now);
  }
  const half = Math.floor(sizes.length / 2);
  const perMs = sizes.slice(half, -1).reduce((a, b) => a + b, 0) / (starts.at(-1)! - starts[half]!);
  return { sizes, starts, waits, perMs };
}

describe("adaptive batching", () => {
  test("while fewer are queued than were lately present, and the next is due, it waits what one batch saves over two; else 0", () => {
    const model = fitted(10, 2);
    const view = { queued: 5, maxBatchSize: 32, present: 6, backMs: 0 };
    // One more client is on its way: a batch of 6 after up to the fixed 10 ms costs less an item
    // than one of 5 now and one of 1 (two fixed parts for 6 items).
    assert.ok(Math.abs(autoWaitMs(model, view) - 10) < 1e-9);
    assert.ok(Math.abs(autoWaitMs(model, { ...view, present: 5.2 }) - 10) < 1e-9, "a share of a client counts as one");
    assert.equal(autoWaitMs(model, { ...view, queued: 6 }), 0, "all there: it leaves at once");
    assert.equal(autoWaitMs(model, { ...view, backMs: 12 }), 0, "the next comes later than the 10 ms a batch saves");
    assert.equal(autoWaitMs(new LatencyModel(), view), 0, "no model yet");
    // 24 clients, batches of up to 16, 8 queued: 16 after w against 8 now and 16 next,
    // (10 + w) / 16 < 20 / 24, so w < 10 / 3.
    assert.ok(Math.abs(autoWaitMs(model, { queued: 8, maxBatchSize: 16, present: 24, backMs: 1 }) - 10 / 3) < 1e-9);
    // 1 queued of 64: a batch of 16 after w against 1 now and 16 next: 10 × (32 / 17 − 1).
    assert.ok(Math.abs(autoWaitMs(model, { queued: 1, maxBatchSize: 16, present: 64, backMs: 0 }) - 10 * (32 / 17 - 1)) < 1e-9);
  });

  test("the clients lately present are the most seen at an arrival over the last 4 batches", () => {
    const presence = new Presence();
    presence.arrived(6);
    presence.arrived(3);
    assert.equal(presence.peak, 6);
    presence.arrived(64);
    for (let i = 0; i < 3; i++) {
      presence.took();
      presence.arrived(1);
    }
    assert.equal(presence.peak, 64, "a batch or two without all the clients back is no fall");
    presence.took();
    presence.arrived(1);
    assert.equal(presence.peak, 1, "a load that fell is followed down");
  });

  test("the requests after a batch's answers are expected back as long after them, and as spread, as lately", () => {
    const lag = new ReturnLag();
    assert.equal(lag.backMs(0), 0);
    // Each batch's clients back 10 to 13 ms after its answers.
    for (let t = 0; t < 1000; t += 50) {
      lag.landed(t);
      for (const ms of [10, 11, 13]) lag.arrived(t + ms);
    }
    lag.landed(1000);
    assert.ok(Math.abs(lag.backMs(1000) - 13) < 0.2, `${lag.backMs(1000)}`);
    assert.ok(Math.abs(lag.backMs(1004) - 9) < 0.2);
    assert.equal(lag.backMs(1020), 0, "by now");
  });

  test("under a BatchQueue, 6 clients each back 0.1 ms after the one before: a batch of 6 leaves as soon as they are back", () => {
    const { sizes, starts } = closedLoop(6, 32, (i) => 0.1 * (i + 1), 12);
    assert.deepEqual(sizes.slice(-3), [6, 6, 6], `batches ${sizes}: full of the clients there are`);
    // A batch of 6 takes 22 ms, and the clients come back within 0.6 ms of its answers.
    const cycles = starts.slice(-4).map((t, i, all) => (i === 0 ? 0 : t - all[i - 1]!)).slice(1);
    assert.ok(cycles.every((ms) => ms < 23.5), `batches every ${cycles.map((ms) => ms.toFixed(1))} ms: none waits for a batch of 32 that never comes`);
  });

  test("in a closed loop it waits for the clients on their way back rather than split them in two batches", () => {
    // 12 clients back 1 to 3.75 ms after their answers: a batch of 12 each cycle (34 ms + 3.75 of
    // waiting), not two that each pay the 10 ms fixed part, as a wait of 0 does.
    const lag = (i: number) => 1 + 0.25 * i;
    const auto = closedLoop(12, 16, lag, 40);
    const none = closedLoop(12, 16, lag, 40, 0);
    assert.deepEqual(auto.sizes.slice(-4), [12, 12, 12, 12], `batches ${auto.sizes}`);
    assert.ok(none.sizes.slice(-4).some((n) => n < 12), `wait 0 splits: ${none.sizes}`);
    assert.ok(auto.perMs > 1.1 * none.perMs, `auto ${auto.perMs.toFixed(3)} against wait 0 ${none.perMs.toFixed(3)} an ms`);
    // 24 clients, batches of up to 16: the 8 queued wait for 8 of the 16 on their way if all are
    // back within 10 / 3 ms (here 1 to 2.5 ms), else they leave at once.
    assert.deepEqual(closedLoop(24, 16, (i) => 1 + 0.1 * i, 40).sizes.slice(-4), [16, 16, 16, 16]);
    const spread = closedLoop(24, 16, lag, 40);
    assert.ok(spread.perMs >= closedLoop(24, 16, lag, 40, 0).perMs, `batches ${spread.sizes}`);
    // Clients back later than the fixed part: it seldom waits, and loses little against a wait of 0.
    const slow = (i: number) => 15 + 0.25 * i;
    const late = closedLoop(12, 16, slow, 40);
    assert.ok(late.perMs > 0.9 * closedLoop(12, 16, slow, 40, 0).perMs, `slow clients: ${late.perMs.toFixed(3)} an ms, batches ${late.sizes}`);
  });

  test("a preferred size that is queued leaves at once; below the smallest, the wait decides", () => {
    const policy: BatchPolicy = { maxBatchSize: 16, maxWaitMs: 10, preferredBatchSize: [4, 8] };
    assert.deepEqual(decideBatch(5, 0, 0, policy), { send: 4 });
    assert.deepEqual(decideBatch(9, 0, 0, policy), { send: 8 });
    assert.deepEqual(decideBatch(3, 0, 0, policy), { wakeAt: 10 });
    assert.deepEqual(decideBatch(3, 0, 0, policy, 2), { wakeAt: 2 }, "the wait auto chose");
  });

  test("under a BatchQueue, maxWaitMs auto waits what the model says and shows it, never past what the head's deadline allows", () => {
    const clock = { now: 0 };
    const waits: number[] = [];
    const queue = new BatchQueue({ policy: { maxBatchSize: 32, maxWaitMs: "auto" }, capacity: 100, owner: "stage T_1", order: queueOrderOf({}), wake: () => {}, waited: () => {}, now: () => clock.now, running: () => 3, waitChosen: (ms) => waits.push(ms) });
    const task = (name: string, timeoutMs: number) => new Task([], { requestId: name, headers: {}, deadline: 0, route: "/inference" }, clock.now + timeoutMs, name, undefined, { send: () => {}, fail: () => {}, chunk: () => {}, end: () => {}, release: () => {} });
    for (let i = 0; i < MIN_BATCHES; i++) queue.landed(Array.from({ length: 2 ** i }, (_, j) => task(`w${i}-${j}`, 1000)), 10 + 2 * 2 ** i);
    // 3 at the worker, 1 queued: 4 present, the next due now; a batch of 4 saves a fixed part.
    queue.admit(task("a", 1000));
    assert.equal(queue.next(), undefined, "it waits");
    assert.ok(Math.abs(waits.at(-1)! - 10) < 1e-9, `waits ${waits}`);
    clock.now = 10;
    assert.equal(queue.next()?.length, 1, "and leaves when the wait is out");
    // A head with 50 ms to live: a full batch takes 74, so the batch leaves at once.
    queue.admit(task("urgent", 50));
    assert.equal(queue.next()?.length, 1, "it left at once");
    assert.equal(waits.at(-1), 0);
  });
});

describe("cost-aware batching", () => {
  test("a batch holds what its cost budget takes, the first item whatever its cost; a queue holding the budget leaves at once", () => {
    const q = setUp({}, { maxBatchSize: 8, maxWaitMs: 1000, maxBatchCost: 100 });
    const sized = (name: string, bytes: number) => {
      const t = q.task(name);
      t.payload = new Uint8Array(bytes);
      return t;
    };
    for (const [name, bytes] of [["a", 60], ["b", 30], ["c", 30], ["d", 10], ["e", 250]] as const) q.queue.admit(sized(name, bytes));
    const sizes = () => q.queue.next()?.map((t) => (t.payload as Uint8Array).byteLength);
    assert.deepEqual(sizes(), [60, 30], "full by cost: it left at once, long before maxWaitMs");
    assert.deepEqual(sizes(), [30, 10]);
    assert.deepEqual(sizes(), [250], "one item over the budget still goes, alone");
    q.queue.admit(sized("f", 20));
    assert.equal(q.queue.next(), undefined, "20 of 100: a partial batch waits");
  });

  test("sizeOf gives the cost; one that is not a number above 0 counts 1", () => {
    const clock = { now: 0 };
    const queue = new BatchQueue({ policy: { maxBatchSize: 8, maxWaitMs: 0, maxBatchCost: 3 }, capacity: 100, owner: "stage T_1", order: queueOrderOf({}), wake: () => {}, waited: () => {}, now: () => clock.now, sizeOf: (item) => (item as { tokens: number }).tokens });
    const reply: Reply = { send: () => {}, fail: () => {}, chunk: () => {}, end: () => {}, release: () => {} };
    for (const tokens of [2, -1, 1, 2]) queue.admit(new Task([], { requestId: "x", headers: {}, deadline: 0, route: "/" }, 1000, { tokens }, undefined, reply));
    assert.deepEqual(queue.next()!.map((t) => t.cost), [2, 1]);
    assert.deepEqual(queue.next()!.map((t) => t.cost), [1, 2]);
  });
});

describe("length buckets", () => {
  /** A queue whose items are named by their cost: "s10" costs 10; level 1 when the name ends in "!". */
  function bucketed(settings: PrioritySettings, maxBatchSize = 4) {
    const q = setUp({ batchBuckets: [16, 64], ...settings }, { maxBatchSize, maxWaitMs: 0 }, () => 1, (item) => parseInt(String(item).slice(1), 10));
    const add = (...names: string[]) => {
      for (const name of names) {
        const task = q.task(name);
        if (name.endsWith("!")) task.priority = 1;
        assert.equal(q.queue.admit(task), undefined);
      }
    };
    const batch = () => q.queue.next()?.map((t) => t.payload);
    return { ...q, add, batch };
  }

  test("an item's bucket is the first bound it does not exceed", () => {
    assert.deepEqual([1, 16, 17, 64, 65, 1e6].map((cost) => bucketOf(cost, [16, 64])), [0, 0, 1, 1, 2, 2]);
  });

  test("a batch holds its first item's bucket only, in queue order; the items set aside lead the next batches", () => {
    const q = bucketed({});
    q.add("s10", "s100", "s12", "s50", "s14", "s60", "s200");
    assert.deepEqual(q.batch(), ["s10", "s12", "s14"]);
    assert.deepEqual(q.batch(), ["s100", "s200"], "the oldest left leads, whatever its bucket");
    assert.deepEqual(q.batch(), ["s50", "s60"]);
    assert.equal(q.queue.queued, 0);
  });

  test("nothing starves: an item set aside leads the very next batch, however many of another bucket come", () => {
    const q = bucketed({});
    q.add("s10", "s100", "s11", "s12", "s13", "s14", "s15");
    assert.deepEqual(q.batch(), ["s10", "s11", "s12", "s13"]);
    q.add("s1", "s2", "s3", "s4");
    assert.deepEqual(q.batch(), ["s100"]);
    assert.deepEqual(q.batch(), ["s14", "s15", "s1", "s2"]);
  });

  test("with priority levels: a higher level still leads; within a level, earliest deadline first; the budget holds too", () => {
    const q = bucketed({ priorityLevels: 2 });
    q.add("s10", "s100", "s12");
    assert.deepEqual(q.batch(), ["s10", "s12"]);
    q.add("s50!", "s13!", "s20");
    assert.deepEqual(q.batch(), ["s50!", "s20"], "level 1 leads; the rest of its bucket follows, of any level");
    assert.deepEqual(q.batch(), ["s13!"]);
    assert.deepEqual(q.batch(), ["s100"]);
    const d = bucketed({ priorityLevels: 1 });
    d.add("s10", "s100", "s11");
    d.queue.admit(d.task("s12", 50));
    assert.deepEqual(d.batch(), ["s12", "s10", "s11"], "the soonest deadline first");
    assert.deepEqual(d.batch(), ["s100"]);
    const c = setUp({ batchBuckets: [16, 64] }, { maxBatchSize: 8, maxWaitMs: 0, maxBatchCost: 30 }, () => 1, (item) => parseInt(String(item).slice(1), 10));
    for (const name of ["s10", "s40", "s12", "s9", "s5"]) c.queue.admit(c.task(name));
    assert.deepEqual(c.queue.next()!.map((t) => t.payload), ["s10", "s12"], "s40 set aside; s9 would pass the budget of 30: the batch ends there");
    assert.deepEqual(c.queue.next()!.map((t) => t.payload), ["s40"]);
  });

  test("the setting, the same in stage options and model-settings.json: bounds above 0, sorted", () => {
    assert.deepEqual(resolveStageOptions("T_1", { batchBuckets: [256, 16, 64, 16] }).priority.batchBuckets, [16, 64, 256]);
    assert.throws(() => resolveStageOptions("T_1", { batchBuckets: [0] }), /invalid stage T_1: option 'batchBuckets.0'/);
    assert.deepEqual(modelSettingsSchema.parse({ name: "m", runtime: "onnx", batchBuckets: [64, 16] }).batchBuckets, [16, 64]);
    assert.equal(modelSettingsSchema.safeParse({ name: "m", runtime: "onnx", batchBuckets: [] }).success, false);
  });

  test("an item set aside that settles leaves the queue, and is never sent", () => {
    const q = bucketed({});
    q.add("s10", "s100", "s11");
    assert.deepEqual(q.batch(), ["s10", "s11"]);
    assert.equal(q.queue.queued, 1);
    q.clock.now = 2000;
    const batch = q.queue.next();
    assert.deepEqual(batch, [], "its deadline passed while it was set aside: answered, not sent");
    assert.equal(q.answers.get("s100")?.status, 408);
    assert.equal(q.queue.queued, 0);
  });
});

describe("fair sharing between tenants", () => {
  test("the share with the least virtual time goes next; one idle comes back at the level's time, not before", () => {
    const a = { weight: 3, virtual: 0 };
    const b = { weight: 1, virtual: 0 };
    const picks: string[] = [];
    for (let i = 0; i < 8; i++) {
      const share = [a, b][pickShare([a, b])]!;
      charge(share, 1);
      picks.push(share === a ? "a" : "b");
    }
    assert.deepEqual(picks.filter((p) => p === "a").length, 6);
    const idle = { weight: 1, virtual: 0 };
    activate(idle, 5);
    assert.equal(idle.virtual, 5);
  });

  test("tenant keys: named ones and the first maxTenants others; the rest share 'other'; none is 'default'", () => {
    const keys = new TenantKeys({ gold: 3 }, 2);
    assert.deepEqual(["gold", "x", "y", "z", "x", ""].map((t) => keys.key(t)), ["gold", "x", "y", "other", "x", "default"]);
    assert.equal(keys.weight("gold"), 3);
    assert.equal(keys.weight("x"), 1);
  });

  test("two tenants of weights 3:1 with deep queues share batches 3:1, within a level, and are counted", () => {
    const q = setUp({ tenantWeights: { a: 3, b: 1 } }, { maxBatchSize: 4, maxWaitMs: 0 });
    for (let i = 0; i < 200; i++) {
      q.queue.admit(q.task(`a${i}`, 10_000, "a"));
      q.queue.admit(q.task(`b${i}`, 10_000, "b"));
    }
    const served: string[] = [];
    for (let i = 0; i < 25; i++) served.push(...q.queue.next()!.map((t) => t.tenant));
    assert.equal(served.filter((t) => t === "a").length, 75);
    assert.equal(served.filter((t) => t === "b").length, 25);
    assert.equal(q.tenants.filter(([t, o]) => t === "a" && o === "served").length, 75);
    assert.equal(q.tenants.filter(([t, o]) => t === "b" && o === "queued").length, 200);
  });

  test("fairness is inside each priority level: a higher level still goes first", () => {
    const q = setUp({ priorityLevels: 2, tenantWeights: {} }, { maxBatchSize: 1, maxWaitMs: 0 });
    for (let i = 0; i < 3; i++) q.queue.admit(q.task(`low${i}`, 10_000, "a"));
    const high = q.task("high", 10_000, "b");
    high.priority = 1;
    q.queue.admit(high);
    assert.equal(q.queue.next()![0]!.payload, "high");
  });

  test("where a request names its tenant: a header, a V2 parameter (else the header), an API key never shown", () => {
    const headers: Record<string, string> = { "x-tenant": " acme ", authorization: "Bearer s3cret" };
    const header = (name: string) => headers[name];
    assert.equal(tenantOf(parseTenantKey("header:X-Tenant"), header), "acme");
    assert.equal(tenantOf(parseTenantKey("parameter:x-tenant"), header, () => "from-param"), "from-param");
    assert.equal(tenantOf(parseTenantKey("parameter:x-tenant"), header, () => undefined), "acme");
    const key = tenantOf(parseTenantKey("api-key"), header);
    assert.match(key, /^key-[0-9a-f]{12}$/);
    assert.ok(!key.includes("s3cret"));
    assert.equal(tenantOf(parseTenantKey("header:x-none"), header), "");
    assert.throws(() => parseTenantKey("cookie:x"), /expected header:NAME, parameter:NAME or api-key/);
  });
});

describe("the response cache", () => {
  const answer = (bytes: number) => ({ body: new Uint8Array(bytes), contentType: "application/json", headers: undefined });

  test("bounded in bytes, the least recently used leaves first; one larger than the whole is not kept", () => {
    const cache = new ResponseCache(3 * (1000 + 256));
    cache.set("a", answer(1000));
    cache.set("b", answer(1000));
    cache.set("c", answer(1000));
    assert.ok(cache.get("a") !== undefined, "a is now the most recently used");
    cache.set("d", answer(1000));
    assert.equal(cache.get("b"), undefined, "b was the least recently used");
    assert.ok(cache.get("a") && cache.get("c") && cache.get("d"));
    assert.equal(cache.bytes, 3 * 1256);
    cache.set("huge", answer(10_000));
    assert.equal(cache.get("huge"), undefined);
    assert.equal(cache.bytes, 3 * 1256);
  });

  test("the key changes with each part, and parts cannot run together; no-cache and no-store turn it off", () => {
    const body = new TextEncoder().encode('{"x":1}');
    const base = cacheKey("/r", "v1", "application/json", undefined, body);
    assert.equal(cacheKey("/r", "v1", "application/json", undefined, body), base);
    for (const other of [cacheKey("/s", "v1", "application/json", undefined, body), cacheKey("/r", "v2", "application/json", undefined, body), cacheKey("/r", "v1", "text/plain", undefined, body), cacheKey("/r", "v1", "application/json", "a=1", body), cacheKey("/r", "v1", "application/json", undefined, new TextEncoder().encode('{"x":2}'))]) assert.notEqual(other, base);
    assert.notEqual(cacheKey("/ab", "", undefined, undefined, body), cacheKey("/a", "b", undefined, undefined, body));
    assert.equal(cacheAllowed(undefined), true);
    assert.equal(cacheAllowed("max-age=0"), true);
    assert.equal(cacheAllowed("no-cache"), false);
    assert.equal(cacheAllowed("private, no-store"), false);
  });
});
