/**
 * Fan-out and fan-in without a server: the marker, the route checks, and a task's sub-items on
 * steps of the test's own (a real BatchQueue in the middle), gathered in order, failed, dropped.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ShoalError } from "../src/errors.js";
import { fanOut, isFanOut } from "../src/fan-out.js";
import { BatchQueue } from "../src/scheduling/batch-queue.js";
import { checkFanOut, checkGatheredAnswers, type FanOutStage } from "../src/scheduling/check-fan-out.js";
import { Fifo } from "../src/scheduling/fifo.js";
import { gatherIndex, isJsonType, jsonArray, ownBuffers, SubItems } from "../src/scheduling/sub-items.js";
import { Task, type Reply, type Step } from "../src/scheduling/task.js";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const utf8 = (s: string) => new TextEncoder().encode(s);

describe("fanOut()", () => {
  test("marks an array, or an iterable made one, as the sub-items of an item", () => {
    const marker = fanOut(["a", "b"]);
    assert.ok(isFanOut(marker));
    assert.deepEqual(marker.values, ["a", "b"]);
    assert.deepEqual(fanOut(new Set([1, 2])).values, [1, 2]);
    assert.deepEqual(fanOut({ length: 2, 0: "x", 1: "y" }).values, ["x", "y"]);
    assert.ok(!isFanOut(["a", "b"]));
    assert.ok(!isFanOut({ values: ["a"] }));
    assert.ok(!isFanOut(null));
  });

  test("refuses what is not a list of values (a string would split into letters)", () => {
    assert.throws(() => fanOut("ab" as never), TypeError);
    assert.throws(() => fanOut(undefined as never), TypeError);
  });
});

describe("the pure parts", () => {
  test("jsonArray joins JSON bodies into one array", () => {
    assert.equal(text(jsonArray([])), "[]");
    assert.equal(text(jsonArray([utf8('{"a":1}')])), '[{"a":1}]');
    assert.deepEqual(JSON.parse(text(jsonArray([utf8("1"), utf8('"two"'), utf8("[3]")]))), [1, "two", [3]]);
  });

  test("isJsonType knows JSON and +json types, with parameters", () => {
    for (const type of ["application/json", "application/json; charset=utf-8", "application/problem+json", "APPLICATION/JSON"]) assert.ok(isJsonType(type), type);
    for (const type of ["application/msgpack", "application/octet-stream", "text/plain", "application/jsonl", "application/json-seq"]) assert.ok(!isJsonType(type), type);
  });

  test("ownBuffers gives each value its own buffers, and a buffer two values hold to neither", () => {
    const a = new Float32Array(4);
    const b = new Uint8Array(8);
    const shared = new ArrayBuffer(16);
    const view = new Float32Array(new ArrayBuffer(64), 16, 4);
    const lists = ownBuffers([{ a }, b, "text", new Uint8Array(shared), { again: new Uint8Array(shared) }, view]);
    assert.deepEqual(lists, [[a.buffer], [b.buffer], undefined, undefined, undefined, undefined]);
  });

  test("gatherIndex: the next step that gathers, or the steps' end", () => {
    const steps: Step[] = [{ admit: () => undefined }, { admit: () => undefined }, { admit: () => undefined, gathers: true }, { admit: () => undefined }];
    assert.equal(gatherIndex(steps, 0), 2);
    assert.equal(gatherIndex(steps, 2), 4);
  });
});

describe("checkFanOut", () => {
  const stage = (name: string, options: Partial<FanOutStage["options"]> = {}): FanOutStage => ({ name, options: { fanOut: undefined, gather: false, ...options } });
  const fans = { fanOut: { max: 4 } };

  test("a fan-out gathered by a later stage, or at the route's end, and another after the first is gathered", () => {
    assert.equal(checkFanOut("/r", [stage("A"), stage("B", fans), stage("C"), stage("D", { gather: true })]), undefined);
    assert.equal(checkFanOut("/r", [stage("A", fans), stage("B")])?.name, "A");
    // A stage may gather one fan-out and start the next.
    assert.equal(checkFanOut("/r", [stage("A", fans), stage("B", { gather: true, ...fans }), stage("C")])?.name, "B");
  });

  test("refuses a gather with nothing to gather, a fan-out at the last stage, and nested fan-outs", () => {
    assert.throws(() => checkFanOut("/r", [stage("A"), stage("B", { gather: true })]), { message: "route /r: stage B gathers (gather: true), but no stage before it fans out" });
    assert.throws(() => checkFanOut("/r", [stage("A"), stage("B", fans)]), { message: "route /r: stage B fans out at the route's last stage; its sub-items need a stage after it" });
    assert.throws(() => checkFanOut("/r", [stage("A", fans), stage("B", fans), stage("C", { gather: true })]), /^Error: route \/r: stage B fans out before the sub-items of A are gathered/);
  });

  test("a route gathered at its end must end in a stage that encodes JSON", () => {
    const route = (contentType: string) => [{ ...stage("A", fans), contentType: "application/json" }, { ...stage("B"), contentType }];
    checkGatheredAnswers("/r", route("application/json; charset=utf-8"));
    assert.throws(() => checkGatheredAnswers("/r", route("application/msgpack")), /^Error: route \/r: the sub-items of A are gathered at the route's end and answered as one JSON array, but its last stage B encodes application\/msgpack/);
    // Gathered by a stage, the answer is that stage's own.
    checkGatheredAnswers("/r", [...route("application/msgpack"), { ...stage("C", { gather: true }), contentType: "application/msgpack" }]);
  });
});

/** A parent task at step 0 of `steps`, with what it was answered. */
function parentOn(steps: readonly Step[], deadline = Infinity) {
  const answer: { sent?: string; type?: string; error?: ShoalError; releases: number } = { releases: 0 };
  const reply: Reply = {
    send: (body, contentType) => Object.assign(answer, { sent: text(body), type: contentType }),
    fail: (error) => (answer.error = error),
    chunk: () => assert.fail("no chunk"),
    end: () => assert.fail("no end"),
    release: () => answer.releases++,
  };
  const parent = new Task(steps, { requestId: "r1", headers: {}, deadline, route: "/r" }, deadline, undefined, undefined, reply);
  return { parent, answer };
}

/** Split (fans out) → Middle (a BatchQueue nobody pulls) → Join (gathers, records what it got) when `gather`. */
function route(gather: boolean) {
  const queue = new BatchQueue({ policy: { maxBatchSize: 8, maxWaitMs: 0 }, capacity: 1, owner: "stage Middle", order: new Fifo(), wake: () => {}, waited: () => {} });
  const joined: Task[] = [];
  const steps: Step[] = [{ admit: () => assert.fail("the parent is past its first step") }, { admit: (task) => queue.admit(task) }];
  if (gather) steps.push({ admit: (task) => void joined.push(task), gathers: true });
  return { steps, queue, joined };
}

describe("SubItems", () => {
  test("each value is a task of its own at the next step, with its parent's meta and deadline, never refused", () => {
    const { steps, queue } = route(true);
    const deadline = performance.now() + 60_000;
    const { parent } = parentOn(steps, deadline);
    SubItems.start(parent, ["a", "b", "c"]);
    // The middle queue's capacity is 1: sub-items were accepted with their parent, so they queue.
    const children = queue.next()!;
    assert.deepEqual(children.map((c) => c.payload), ["a", "b", "c"]);
    for (const child of children) {
      assert.equal(child.stepIndex, 1);
      assert.equal(child.meta, parent.meta);
      assert.equal(child.deadline, deadline);
      assert.ok(!child.ingress && !child.egress);
    }
  });

  test("gathered in order, however they come back, as the gathering step's one input", () => {
    const { steps, queue, joined } = route(true);
    const { parent, answer } = parentOn(steps);
    const buffer = new Float32Array(2);
    SubItems.start(parent, ["a", "b", "c"]);
    const [a, b, c] = queue.next()!;
    c!.advance("C", undefined);
    a!.advance("A", [buffer.buffer as ArrayBuffer]);
    assert.equal(joined.length, 0, "the parent waits for every sub-item");
    b!.advance("B", undefined);
    assert.deepEqual(joined, [parent]);
    assert.equal(parent.stepIndex, 2);
    assert.deepEqual(parent.payload, ["A", "B", "C"]);
    assert.deepEqual(parent.transfer, [buffer.buffer], "the sub-items' buffers move on with their outputs");
    assert.ok(a!.settled && b!.settled && c!.settled);
    assert.equal(parent.queuedIn, null);
    assert.equal(answer.releases, 0, "the parent is still on its way");
  });

  test("no values: the gathering step gets []", () => {
    const { steps, joined } = route(true);
    const { parent } = parentOn(steps);
    SubItems.start(parent, []);
    assert.deepEqual(joined, [parent]);
    assert.deepEqual(parent.payload, []);
  });

  test("gathered at the route's end: the JSON array of the answers, in order", () => {
    const { steps, queue } = route(false);
    const { parent, answer } = parentOn(steps);
    SubItems.start(parent, ["a", "b"]);
    const [a, b] = queue.next()!;
    assert.ok(a!.egress, "the last stage encodes each sub-item's answer");
    b!.succeed(utf8('"B"'), "application/json");
    a!.succeed(utf8('{"a":1}'), "application/json");
    assert.equal(answer.sent, '[{"a":1},"B"]');
    assert.equal(answer.type, "application/json");
    assert.equal(answer.releases, 1);
  });

  test("no values, gathered at the end: []", () => {
    const { steps } = route(false);
    const { parent, answer } = parentOn(steps);
    SubItems.start(parent, []);
    assert.equal(answer.sent, "[]");
  });

  test("an answer that is not JSON fails the parent (500), gathered at the end", () => {
    const { steps, queue } = route(false);
    const { parent, answer } = parentOn(steps);
    SubItems.start(parent, ["a", "b"]);
    queue.next()![0]!.succeed(utf8("a"), "text/plain");
    assert.equal(answer.error?.status, 500);
    assert.match(answer.error!.publicMessage, /^encoding error: a sub-item was answered as text\/plain/);
  });

  test("a sub-item's error is its parent's; the others still queued are dropped, and the parent answered once", () => {
    const { steps, queue, joined } = route(true);
    const { parent, answer } = parentOn(steps);
    SubItems.start(parent, ["a", "b", "c"]);
    const [a, b, c] = queue.next()!;
    a!.advance("A", undefined);
    // c is queued again (say at a stage of its own), b fails.
    queue.admit(c!);
    b!.fail(new ShoalError("VALIDATION", "b is bad"));
    assert.equal(answer.error?.publicMessage, "request validation error: b is bad");
    assert.equal(answer.releases, 1);
    assert.ok(c!.settled);
    assert.equal(queue.queued, 0, "the dropped sub-item left its queue");
    c!.advance("C", undefined);
    c!.fail(new ShoalError("SERVER"));
    assert.equal(joined.length, 0);
    assert.equal(answer.releases, 1, "answered once");
  });

  test("a parent that settles meanwhile (its deadline, its client gone) drops its sub-items", () => {
    for (const settle of [(t: Task) => t.fail(new ShoalError("TIMEOUT")), (t: Task) => t.drop()]) {
      const { steps, queue, joined } = route(true);
      const { parent, answer } = parentOn(steps);
      SubItems.start(parent, ["a", "b"]);
      assert.equal(queue.queued, 2);
      settle(parent);
      assert.equal(queue.queued, 0, "nothing left queued");
      assert.equal(queue.next(), undefined);
      assert.equal(answer.releases, 1);
      assert.equal(joined.length, 0);
    }
  });

  test("the last sub-item's queue and forward times count in its parent's", () => {
    const { steps, queue } = route(true);
    const { parent } = parentOn(steps);
    parent.queueMs = 1;
    parent.forwardMs = 2;
    SubItems.start(parent, ["a", "b"]);
    const [a, b] = queue.next()!;
    a!.forwardMs = 100;
    b!.forwardMs = 7;
    b!.queueMs = 3;
    a!.advance("A", undefined);
    b!.advance("B", undefined);
    assert.equal(parent.forwardMs, 9);
    assert.equal(parent.queueMs, 4);
  });
});
