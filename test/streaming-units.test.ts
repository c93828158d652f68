/**
 * The parts of streaming that need no server: Accept negotiation, framing, stream settings, the
 * worker side of one item's stream (pause, resume, cancel), and the StepWorker's scheduler.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ShoalError } from "../src/errors.js";
import { frameChunk, frameError, negotiate } from "../src/http/stream-reply.js";
import { resolveStageOptions, STREAM_BUFFER_BYTES, streamPolicy } from "../src/stage-options.js";
import { StepWorker, type StepResult } from "../src/step-worker.js";
import type { RequestMeta } from "../src/worker.js";
import { ItemStream } from "../src/workers/item-stream.js";
import { StepScheduler } from "../src/workers/step-scheduler.js";

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("utf8");
const utf8 = (s: string) => new TextEncoder().encode(s);
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await turn();
}

describe("negotiate()", () => {
  const cases: [string | undefined, "sse" | "ndjson", "sse" | "ndjson" | undefined][] = [
    [undefined, "sse", "sse"],
    ["", "ndjson", "ndjson"],
    ["*/*", "ndjson", "ndjson"],
    ["text/event-stream", "ndjson", "sse"],
    ["application/x-ndjson", "sse", "ndjson"],
    ["application/jsonl", "sse", "ndjson"],
    ["application/json", "sse", undefined],
    ["application/msgpack", "sse", undefined],
    ["text/html, application/xhtml+xml", "sse", undefined],
    ["application/json, text/event-stream", "ndjson", "sse"],
    ["application/json, */*;q=0.1", "ndjson", "ndjson"],
    ["Text/Event-Stream", "ndjson", "sse"],
    ["APPLICATION/X-NDJSON", "sse", "ndjson"],
  ];
  for (const [accept, route, expected] of cases) {
    test(`Accept ${JSON.stringify(accept)} on a route that streams ${route}: ${expected ?? "gathered"}`, () => {
      assert.equal(negotiate(accept, route), expected);
    });
  }
});

describe("frameChunk() and frameError()", () => {
  test("SSE: a chunk without line breaks is one data line and a blank line", () => {
    assert.equal(text(frameChunk("sse", utf8('{"a":1}'))), 'data: {"a":1}\n\n');
    assert.equal(text(frameChunk("sse", utf8(""))), "data: \n\n");
  });

  test("SSE: each line of a chunk is a data line, whatever its line break", () => {
    assert.equal(text(frameChunk("sse", utf8("a\nb"))), "data: a\ndata: b\n\n");
    assert.equal(text(frameChunk("sse", utf8("a\r\nb\rc"))), "data: a\ndata: b\ndata: c\n\n");
    assert.equal(text(frameChunk("sse", utf8("end\n"))), "data: end\ndata: \n\n");
  });

  test("NDJSON: the chunk and a line feed", () => {
    assert.equal(text(frameChunk("ndjson", utf8('{"a":1}'))), '{"a":1}\n');
  });

  test("a chunk that is a view into a larger buffer is framed from its own bytes only", () => {
    const whole = utf8('xx{"a":1}yy');
    assert.equal(text(frameChunk("sse", whole.subarray(2, 9))), 'data: {"a":1}\n\n');
    assert.equal(text(frameChunk("ndjson", whole.subarray(2, 9))), '{"a":1}\n');
  });

  test("the error frame: an SSE error event, or an NDJSON line, with the error's public JSON", () => {
    const error = new ShoalError("SLOW_CLIENT", "the client read too slowly: 9 bytes waited");
    assert.equal(frameError("sse", error), 'event: error\ndata: {"error":"stream backlog full: the client read too slowly: 9 bytes waited"}\n\n');
    assert.equal(frameError("ndjson", error), '{"error":"stream backlog full: the client read too slowly: 9 bytes waited"}\n');
  });
});

describe("stream settings", () => {
  test("streamPolicy(): true gets the defaults, false and absent are no stream, an object fills in the rest", () => {
    assert.deepEqual(streamPolicy("S_1", true), { bufferBytes: STREAM_BUFFER_BYTES, whenFull: "pause", transport: "sse" });
    assert.equal(streamPolicy("S_1", false), undefined);
    assert.equal(streamPolicy("S_1", undefined), undefined);
    assert.deepEqual(streamPolicy("S_1", { whenFull: "fail" }), { bufferBytes: STREAM_BUFFER_BYTES, whenFull: "fail", transport: "sse" });
    assert.deepEqual(streamPolicy("S_1", { bufferBytes: 10, transport: "ndjson" }), { bufferBytes: 10, whenFull: "pause", transport: "ndjson" });
  });

  for (const bad of [{ whenFull: "drop" }, { bufferBytes: 0 }, { bufferBytes: 1.5 }, { transport: "websocket" }, { unknown: 1 }, "yes", 1]) {
    test(`streamPolicy(): ${JSON.stringify(bad)} is a TypeError naming the stage`, () => {
      assert.throws(() => streamPolicy("Gen_3", bad), (err: Error) => err instanceof TypeError && /^invalid stage Gen_3: static streaming must be true, false or \{/.test(err.message));
    });
  }

  test("resolveStageOptions(): maxActive and continuous are for a StepWorker only", () => {
    for (const options of [{ maxActive: 4 }, { continuous: false }]) {
      assert.throws(() => resolveStageOptions("Plain_2", options, { streaming: true }), (err: Error) => err instanceof TypeError && err.message === "invalid stage Plain_2: options 'maxActive' and 'continuous' are for a StepWorker");
      assert.throws(() => resolveStageOptions("Plain_2", options), TypeError);
    }
  });

  test("resolveStageOptions(): a bad maxActive names the option", () => {
    for (const maxActive of [0, 2.5, -1]) {
      assert.throws(() => resolveStageOptions("Gen_1", { maxActive }, { stepwise: true, streaming: true }), /^TypeError: invalid stage Gen_1: option 'maxActive'/);
    }
    assert.throws(() => resolveStageOptions("Gen_1", { continuous: "no" } as never, { stepwise: true }), /invalid stage Gen_1: option 'continuous'/);
  });

  test("resolveStageOptions(): a StepWorker joins up to 8 by default, maxActive when given, and not at all with continuous: false", () => {
    const step = { stepwise: true, streaming: true };
    assert.equal(resolveStageOptions("G_1", {}, step).maxActive, 8);
    assert.equal(resolveStageOptions("G_1", { maxActive: 3 }, step).maxActive, 3);
    assert.equal(resolveStageOptions("G_1", { continuous: false, maxBatchSize: 4 }, step).maxActive, undefined);
    assert.equal(resolveStageOptions("G_1", { continuous: true }, step).maxActive, 8);
    assert.deepEqual(resolveStageOptions("G_1", {}, step).stream, { bufferBytes: STREAM_BUFFER_BYTES, whenFull: "pause", transport: "sse" });
    assert.equal(resolveStageOptions("P_1", {}, {}).stream, undefined);
  });
});

/** A generator that counts how many chunks were pulled from it and whether its finally ran. */
function counted(limit = Infinity, waits = false) {
  const seen = { pulled: 0, finished: false };
  async function* source() {
    try {
      for (let i = 0; i < limit; i++) {
        if (waits) await new Promise((resolve) => setTimeout(resolve, 1));
        seen.pulled++;
        yield i;
      }
    } finally {
      seen.finished = true;
    }
  }
  return { seen, source: source() };
}

describe("ItemStream", () => {
  test("drain() gives every chunk in order and resolves true at the end", async () => {
    const stream = new ItemStream();
    const got: unknown[] = [];
    const { seen, source } = counted(5);
    assert.equal(await stream.drain(source, (c) => got.push(c)), true);
    assert.deepEqual(got, [0, 1, 2, 3, 4]);
    assert.equal(seen.finished, true);
    assert.equal(stream.signal.aborted, false);
  });

  test("pause stops pulling where it is; resume goes on", async () => {
    const stream = new ItemStream();
    const got: unknown[] = [];
    const { seen, source } = counted(10);
    const done = stream.drain(source, (c) => {
      got.push(c);
      if (c === 2) stream.flow("pause");
    });
    await turns(20);
    assert.equal(seen.pulled, 3, "nothing pulled after the pause");
    assert.equal(seen.finished, false);
    stream.flow("resume");
    assert.equal(await done, true);
    assert.equal(got.length, 10);
  });

  test("cancel aborts the signal, ends the generator (its finally runs) and resolves false", async () => {
    const stream = new ItemStream();
    const { seen, source } = counted(Infinity, true);
    const done = stream.drain(source, (c) => {
      if (c === 3) stream.flow("cancel");
    });
    assert.equal(await done, false);
    assert.equal(stream.signal.aborted, true);
    assert.equal(seen.finished, true);
    assert.equal(seen.pulled, 4);
  });

  test("cancel reaches a generator that never waits (it would otherwise run in microtasks forever)", { timeout: 10_000 }, async () => {
    const stream = new ItemStream();
    const { seen, source } = counted();
    setTimeout(() => stream.flow("cancel"), 5);
    assert.equal(await stream.drain(source, () => {}), false);
    assert.ok(seen.pulled > 0);
    assert.equal(seen.finished, true);
  });

  test("a pause from outside reaches a generator that never waits", { timeout: 10_000 }, async () => {
    const stream = new ItemStream();
    const { seen, source } = counted();
    setTimeout(() => stream.flow("pause"), 5);
    const done = stream.drain(source, () => {});
    await new Promise((resolve) => setTimeout(resolve, 50));
    const held = seen.pulled;
    await turns(20);
    assert.equal(seen.pulled, held, "nothing pulled while paused");
    stream.flow("resume");
    while (seen.pulled < held + 10) await turn();
    stream.flow("cancel");
    assert.equal(await done, false);
  });

  test("cancel while paused ends the stream", async () => {
    const stream = new ItemStream();
    const { seen, source } = counted(10);
    const done = stream.drain(source, (c) => {
      if (c === 1) stream.flow("pause");
    });
    await turns(5);
    stream.flow("cancel");
    assert.equal(await done, false);
    assert.equal(seen.finished, true);
  });

  test("what the generator throws, drain() throws", async () => {
    const stream = new ItemStream();
    async function* failing() {
      yield 1;
      throw new Error("broke");
    }
    await assert.rejects(stream.drain(failing(), () => {}), /broke/);
  });

  test("what take() throws ends the generator and is thrown", async () => {
    const stream = new ItemStream();
    const { seen, source } = counted(10);
    await assert.rejects(
      stream.drain(source, () => {
        throw new Error("cannot encode");
      }),
      /cannot encode/,
    );
    assert.equal(seen.finished, true);
  });
});

interface Seq {
  tag: string;
  len: number;
  k: number;
  failStep?: number;
}

/** A StepWorker that records each step's sequences and each leave. */
class Recorder extends StepWorker<{ tag: string; len: number; failJoin?: boolean; failStep?: number }, Seq, string> {
  steps: string[][] = [];
  left: string[] = [];
  joins: string[][] = [];
  badJoin = false;

  join(inputs: { tag: string; len: number; failJoin?: boolean; failStep?: number }[]): Seq[] {
    this.joins.push(inputs.map((i) => i.tag));
    if (inputs.some((i) => i.failJoin)) throw new Error("join failed");
    if (this.badJoin) return [];
    return inputs.map((i) => ({ tag: i.tag, len: i.len, k: 0, failStep: i.failStep }));
  }

  step(active: Seq[]): StepResult<string>[] {
    this.steps.push(active.map((s) => s.tag));
    if (active.some((s) => s.failStep === s.k)) throw new Error("step failed");
    return active.map((s) => ({ chunk: `${s.tag}${s.k++}`, done: s.k >= s.len }));
  }

  override leave(seq: Seq): void {
    this.left.push(seq.tag);
  }
}

const meta = (id: string): RequestMeta => ({ requestId: id, headers: {}, deadline: Infinity, route: "/gen" });

async function all(iterable: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const chunk of iterable) out.push(chunk);
  return out;
}

describe("StepScheduler", () => {
  test("sequences of different lengths step together; each leaves as soon as it is done", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [a, b] = scheduler.join([{ tag: "a", len: 2 }, { tag: "b", len: 4 }], [meta("a"), meta("b")]);
    const [chunksA, chunksB] = await Promise.all([all(a!), all(b!)]);
    assert.deepEqual(chunksA, ["a0", "a1"]);
    assert.deepEqual(chunksB, ["b0", "b1", "b2", "b3"]);
    assert.deepEqual(worker.steps, [["a", "b"], ["a", "b"], ["b"], ["b"]]);
    assert.deepEqual(worker.left, ["a", "b"]);
    assert.equal(scheduler.active, 0);
  });

  test("a request that arrives while others run joins between steps, and finishes first when it is short", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [long] = scheduler.join([{ tag: "L", len: 20 }], [meta("L")]);
    const order: string[] = [];
    const longDone = all(long!).then((c) => (order.push("L"), c));
    while (worker.steps.length < 3) await turn();
    const [short] = scheduler.join([{ tag: "s", len: 2 }], [meta("s")]);
    assert.deepEqual(await all(short!).then((c) => (order.push("s"), c)), ["s0", "s1"]);
    assert.equal((await longDone).length, 20);
    assert.deepEqual(order, ["s", "L"]);
    assert.deepEqual(worker.joins, [["L"], ["s"]]);
    assert.ok(worker.steps.some((s) => s.length === 2));
  });

  test("a sequence whose reader lags 4 chunks sits out the steps until it reads", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [slow, fast] = scheduler.join([{ tag: "slow", len: 10 }, { tag: "fast", len: 10 }], [meta("slow"), meta("fast")]);
    assert.deepEqual(await all(fast!), ["fast0", "fast1", "fast2", "fast3", "fast4", "fast5", "fast6", "fast7", "fast8", "fast9"]);
    const slowSteps = () => worker.steps.filter((s) => s.includes("slow")).length;
    assert.equal(slowSteps(), 4);
    assert.deepEqual(await all(slow!), Array.from({ length: 10 }, (_, i) => `slow${i}`));
    assert.equal(slowSteps(), 10);
  });

  test("a reader that leaves (return()) makes its sequence leave; the others go on", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [gone, stays] = scheduler.join([{ tag: "gone", len: 1000 }, { tag: "stays", len: 6 }], [meta("gone"), meta("stays")]);
    const it = gone![Symbol.asyncIterator]();
    await it.next();
    await it.return!();
    assert.equal((await all(stays!)).length, 6);
    assert.ok(worker.left.includes("gone"));
    assert.ok(worker.steps.filter((s) => s.includes("gone")).length < 10);
    assert.equal(scheduler.active, 0);
  });

  test("join() throwing fails the sequences that joined with it only", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [running] = scheduler.join([{ tag: "r", len: 8 }], [meta("r")]);
    const runningDone = all(running!);
    while (worker.steps.length < 2) await turn();
    const [bad] = scheduler.join([{ tag: "bad", len: 3, failJoin: true }], [meta("bad")]);
    await assert.rejects(all(bad!), /join failed/);
    assert.equal((await runningDone).length, 8);
  });

  test("join() returning the wrong number of states fails those sequences with a message that says so", async () => {
    const worker = new Recorder();
    worker.badJoin = true;
    const [a] = new StepScheduler(worker).join([{ tag: "a", len: 1 }], [meta("a")]);
    await assert.rejects(all(a!), /join\(\) returned an array of 0 for 1 inputs; it must return one state per input/);
  });

  test("step() throwing fails the sequences of that step, each leaves, and later ones are served", async () => {
    const worker = new Recorder();
    const scheduler = new StepScheduler(worker);
    const [a, b] = scheduler.join([{ tag: "a", len: 10 }, { tag: "b", len: 10, failStep: 2 }], [meta("a"), meta("b")]);
    const got: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const c of b!) got.push(c);
      })(),
      /step failed/,
    );
    assert.deepEqual(got, ["b0", "b1"]);
    await assert.rejects(all(a!), /step failed/);
    assert.deepEqual(worker.left.sort(), ["a", "b"]);
    const [c] = scheduler.join([{ tag: "c", len: 2 }], [meta("c")]);
    assert.deepEqual(await all(c!), ["c0", "c1"]);
  });

  test("offline, forward() generates one input's chunks by join and step, and leaves at the end", async () => {
    const worker = new Recorder();
    assert.deepEqual(await all(worker.forward({ tag: "o", len: 3 })), ["o0", "o1", "o2"]);
    assert.deepEqual(worker.left, ["o"]);
  });
});
