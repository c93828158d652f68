/**
 * Following a request: the access log (`--access-log`, sampled) and the `Server-Timing` header of
 * every accepted request's answer.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Task } from "../src/scheduling/task.js";
import { serverTiming as timingHeader } from "../src/http/http-reply.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { assertError, fixture, post, send, sleep, startServer, type LogLine, type Reply, type ServerProcess } from "./helpers.js";

/** The `Server-Timing` header parsed: `{ queue, forward, total }` in ms. */
function serverTiming(reply: Reply): Record<string, number> {
  const header = reply.headers.get("server-timing");
  assert.ok(header, `no Server-Timing on ${reply.status} ${reply.text}`);
  const timing: Record<string, number> = {};
  for (const part of header.split(",")) {
    const match = /^\s*(\w+);dur=(\d+(?:\.\d+)?)\s*$/.exec(part);
    assert.ok(match, `a metric with its duration: '${part}' in '${header}'`);
    timing[match[1]!] = Number(match[2]);
  }
  assert.deepEqual(Object.keys(timing), ["queue", "forward", "total"], header);
  // Two decimals each: their sum may be off by float rounding, never by more.
  assert.ok(timing.queue! + timing.forward! <= timing.total! + 1e-9, `queue + forward <= total: ${header}`);
  return timing;
}

describe("the Server-Timing header", () => {
  test("parts rounded down and the total up to hundredths of a ms, written as numbers are", () => {
    const times = (queueMs: number, forwardMs: number) => ({ queueMs, forwardMs }) as Task;
    assert.equal(timingHeader(times(0, 0), 0), "queue;dur=0, forward;dur=0, total;dur=0");
    assert.equal(timingHeader(times(1.2399, 0.0501), 1.301), "queue;dur=1.23, forward;dur=0.05, total;dur=1.31");
    assert.equal(timingHeader(times(12.3, 3000.0004), 3012.30001), "queue;dur=12.3, forward;dur=3000, total;dur=3012.31");
    // As `String(Math.floor(ms * 100) / 100)` writes them, for any time.
    for (let i = 0; i < 5000; i++) {
      const [q, f] = [Math.random() * 10 ** (i % 6), Math.random() * 50];
      const t = q + f + Math.random();
      const expected = `queue;dur=${Math.floor(q * 100) / 100}, forward;dur=${Math.floor(f * 100) / 100}, total;dur=${Math.ceil(t * 100) / 100}`;
      assert.equal(timingHeader(times(q, f), t), expected);
    }
  });
});

/** The access line of request `id`, once written. */
function accessLine(server: ServerProcess, id: string): Promise<LogLine> {
  return server.waitForLog((l) => l.msg === "access" && l.requestId === id);
}

describe("the access log", () => {
  let server: ServerProcess;
  before(async () => {
    // /group waits up to 2 s to fill a batch of 8: past a 1 s deadline, a lone request gets 408.
    server = await startServer(fixture("batching.ts"), { args: ["--timeout", "1000"], env: { SHOAL_ACCESS_LOG: "1" } });
  });
  after(async () => {
    await server?.stop();
  });

  test("a batched request's line: method, path, status, sizes, route, queue wait, forward time, batch size and worker; a 422 of the same batch too", async () => {
    const bodies = Array.from({ length: 8 }, (_, i) => JSON.stringify({ i, mode: i === 3 ? "invalid" : undefined }));
    const replies = await Promise.all(bodies.map((body, i) => post(`${server.url}/group`, body, { "x-request-id": `group-${i}` })));
    for (const [i, reply] of replies.entries()) {
      if (i === 3) assertError(reply, 422, "request validation error: item 3 is invalid");
      else assert.equal(reply.status, 200, reply.text);
      const line = await accessLine(server, `group-${i}`);
      const context = JSON.stringify(line);
      assert.equal(line.level, 30, `level info: ${context}`);
      assert.equal(line.method, "POST", context);
      assert.equal(line.path, "/group", context);
      assert.equal(line.route, "/group", context);
      assert.equal(line.status, reply.status, context);
      assert.equal(line.bytesIn, Buffer.byteLength(bodies[i]!), context);
      assert.equal(line.bytesOut, reply.body.byteLength, context);
      assert.equal(line.batchSize, 8, `the 8 requests travelled as one batch: ${context}`);
      assert.equal(line.worker, 1, context);
      const [duration, queue, forward] = [line.durationMs, line.queueMs, line.forwardMs] as number[];
      assert.ok(queue! >= 0 && forward! > 0, context);
      assert.ok(queue! + forward! <= duration! + 0.01, `queue + forward <= duration: ${context}`);
    }
  });

  test("a 408 in the queue: its wait, and no batch nor worker", async () => {
    const reply = await post(`${server.url}/group`, { i: 0 }, { "x-request-id": "late" });
    assertError(reply, 408, /^request timeout: /);
    const line = await accessLine(server, "late");
    const context = JSON.stringify(line);
    assert.equal(line.status, 408, context);
    assert.equal(line.route, "/group", context);
    assert.ok((line.queueMs as number) > 500, `it waited in the queue until its deadline: ${context}`);
    assert.equal(line.forwardMs, 0, context);
    assert.equal(line.batchSize, undefined, context);
    assert.equal(line.worker, undefined, context);
    const timing = serverTiming(reply);
    assert.ok(timing.queue! > 500 && timing.forward === 0, JSON.stringify(timing));
  });

  test("a refused request has its line too, without timings", async () => {
    const reply = await send(`${server.url}/group?secret=1`, { headers: { "x-request-id": "get" } });
    assertError(reply, 405, "method not allowed: GET /group; use POST");
    assert.equal(reply.headers.get("server-timing"), null, "a request never accepted has no Server-Timing");
    const line = await accessLine(server, "get");
    assert.equal(line.method, "GET");
    assert.equal(line.path, "/group", "the query is left out");
    assert.equal(line.status, 405);
    assert.equal(line.queueMs, undefined);
  });
});

describe("the access log, sampled at 0, and Server-Timing", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("pipeline.ts"), { args: ["--access-log", "--access-log-sample", "0"] });
  });
  after(async () => {
    await server?.stop();
  });

  test("Server-Timing on a 200 through two stages and on a 422: parsable, queue + forward <= total; no access line", async () => {
    const ok = await post(`${server.url}/embed`, { n: 4 }, { "x-request-id": "ok" });
    assert.equal(ok.status, 200, ok.text);
    const timing = serverTiming(ok);
    assert.ok(timing.forward! > 0, JSON.stringify(timing));
    const invalid = await post(`${server.url}/embed`, { n: -1 }, { "x-request-id": "invalid" });
    assertError(invalid, 422, /^request validation error: /);
    serverTiming(invalid);
    // A line is written as its answer is: give the pipe from the server time to bring it.
    await sleep(500);
    assert.deepEqual(
      server.logs().filter((l) => l.msg === "access"),
      [],
    );
  });
});

describe("the access log of a model", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  before(async () => {
    repo.module("scale", "scale.ts", { maxBatchSize: 4, maxWaitMs: 5, parameters: { factor: 2 } });
    server = await serveRepository(repo.dir, ["--access-log"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("names the model version, and carries Server-Timing", async () => {
    const reply = await post(`${server.url}/v2/models/scale/infer`, { inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [1, 2] }] }, { "x-request-id": "v2" });
    assert.equal(reply.status, 200, reply.text);
    serverTiming(reply);
    const line = await accessLine(server, "v2");
    const context = JSON.stringify(line);
    assert.equal(line.model, "scale", context);
    assert.equal(line.route, undefined, context);
    assert.equal(line.path, "/v2/models/scale/infer", context);
    assert.equal(line.batchSize, 1, context);
    assert.equal(line.worker, 1, context);
  });
});
