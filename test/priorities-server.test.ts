/**
 * Priorities, deadlines and cancels on a real server, seen from the Workers' side: the order a
 * stage's and a model's Worker computed their items in, that an expired request is never
 * computed, and that a cancel by id answers the cancelled client at once, under the control
 * API's access rules.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { RecordFile, assertError, fixture, metric, post, send, sleep, startServer, waitFor, waitForMetric, type ServerProcess } from "./helpers.js";
import { freePort, V2Client } from "./grpc-helpers.js";

const TOKEN = "cancel-token-1234";

describe("priorities, deadlines and cancels", () => {
  let server: ServerProcess;
  let client: V2Client;
  const calls = new RecordFile();
  before(async () => {
    const port = await freePort();
    server = await startServer(fixture("priorities.ts"), { args: ["--workers", "1", "--grpc-port", String(port), "--model-control", "explicit"], env: { RECORD_FILE: calls.path, SHOAL_ADMIN_TOKEN: TOKEN } });
    client = new V2Client(port);
  });
  after(async () => {
    client?.close();
    await server?.stop();
    calls.remove();
  });

  /** What the Workers computed whose id (or tag) starts with `prefix`, in order. */
  const seen = (prefix: string) => calls.lines().filter((line) => line.startsWith(prefix));
  const until = (what: string, id: string) => waitFor(what, () => (calls.lines().includes(id) ? true : undefined));

  test("a high-priority request overtakes a full queue of low ones on a stage", async () => {
    const url = `${server.url}/ordered`;
    const blocker = post(url, { sleep: 500 }, { "x-request-id": "s-block" });
    await until("the blocker to reach forward()", "s-block");
    const lows = [0, 1, 2, 3, 4].map((i) => post(url, {}, { "x-request-id": `s-low${i}` }));
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Ordered_1" }, (depth) => depth === 5);
    const high = post(url, {}, { "x-request-id": "s-high", "x-shoal-priority": "1" });
    for (const reply of await Promise.all([blocker, high, ...lows])) assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(seen("s-"), ["s-block", "s-high", "s-low0", "s-low1", "s-low2", "s-low3", "s-low4"]);
  });

  test("the same on a model of the shared pool: V2 REST with the header, gRPC with parameters.priority", async () => {
    const url = `${server.url}/v2/models/recorder/infer`;
    const body = (tag: string, sleepMs = 0) => ({ inputs: [{ name: "x", datatype: "INT32", shape: [1], data: [1] }], parameters: { tag, sleep: sleepMs } });
    const blocker = post(url, body("m-block", 500));
    await until("the model's blocker to reach forward()", "m-block");
    const lows = [0, 1, 2].map((i) => post(url, body(`m-low${i}`)));
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "recorder" }, (depth) => depth === 3);
    const rest = post(url, body("m-rest"), { "x-shoal-priority": "1" });
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "recorder" }, (depth) => depth === 4);
    const viaGrpc = client.call("ModelInfer", {
      model_name: "recorder",
      parameters: { priority: { int64_param: "1" }, tag: { string_param: "m-grpc" } },
      inputs: [{ name: "x", datatype: "INT32", shape: [1], contents: { int_contents: [1] } }],
    });
    for (const reply of await Promise.all([blocker, rest, ...lows])) assert.equal(reply.status, 200, reply.text);
    await viaGrpc;
    assert.deepEqual(seen("m-"), ["m-block", "m-rest", "m-grpc", "m-low0", "m-low1", "m-low2"]);
  });

  test("a priority the queue has no level for is a 400, as is a header that is not a number", async () => {
    assertError(await post(`${server.url}/ordered`, {}, { "x-shoal-priority": "3" }), 400, "bad request: priority 3 is out of range: the levels are 1 (highest) to 2, or 0 for the default (2)");
    assertError(await post(`${server.url}/ordered`, {}, { "x-shoal-priority": "high" }), 400, "bad request: x-shoal-priority must be a whole number of 0 or more, not 'high'");
    assert.equal((await post(`${server.url}/plain`, {}, { "x-shoal-priority": "7" })).status, 200, "a queue without levels takes any priority, as it takes every request: in arrival order");
    const e = await client.error("ModelInfer", { model_name: "recorder", parameters: { priority: { int64_param: "9" } }, inputs: [{ name: "x", datatype: "INT32", shape: [1], contents: { int_contents: [1] } }] });
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.match(e.details, /^bad request: priority 9 is out of range/);
  });

  test("a request that shortens its deadline is answered 408 by it, and its Worker never computes it", async () => {
    const url = `${server.url}/plain`;
    const blocker = post(url, { sleep: 600 }, { "x-request-id": "d-block" });
    await until("the blocker to reach forward()", "d-block");
    const short = await post(url, {}, { "x-request-id": "d-short", "x-shoal-timeout-ms": "100" });
    assertError(short, 408, "request timeout: no answer within 100 ms");
    assert.ok(short.elapsedMs < 500, `answered after ${short.elapsedMs} ms: before the blocker ended`);
    const grpcShort = await client.error("ModelInfer", { model_name: "recorder", parameters: { timeout: { int64_param: "1" }, tag: { string_param: "d-grpc" } }, inputs: [{ name: "x", datatype: "INT32", shape: [1], contents: { int_contents: [1] } }] });
    assert.equal(grpcShort.code, grpc.status.DEADLINE_EXCEEDED);
    assert.equal((await blocker).status, 200);
    // The worker is free again: what it computes next shows what it skipped.
    assert.equal((await post(url, {}, { "x-request-id": "d-after" })).status, 200);
    assert.deepEqual(seen("d-"), ["d-block", "d-after"]);
  });

  test("a cancel by id: the queued request is answered 409 at once and never computed; the running one's answer is dropped", async () => {
    const url = `${server.url}/ordered`;
    const cancel = (id: string, token = TOKEN) => send(`${server.url}/v2/requests/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
    const running = post(url, { sleep: 800 }, { "x-request-id": "c-run" });
    await until("the first request to reach forward()", "c-run");
    const queued = post(url, {}, { "x-request-id": "c-queued" });
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Ordered_1" }, (depth) => depth === 1);
    const before = (await metric(server.url, "shoal_requests_cancelled_total", { by: "id" })) ?? 0;
    const done = await cancel("c-queued");
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(done.json, { cancelled: 1 });
    assertError(await queued, 409, "cancelled: request c-queued was cancelled");
    const start = performance.now();
    assert.equal((await cancel("c-run")).status, 200);
    const answer = await running;
    assertError(answer, 409, "cancelled: request c-run was cancelled");
    assert.ok(performance.now() - start < 600, "answered at the cancel, not when its forward() ended");
    assertError(await cancel("c-run"), 404, "not found: no request 'c-run' is in flight");
    assertError(await cancel("c-none", "wrong"), 401, "unauthorized: the admin token is not right");
    assertError(await send(`${server.url}/v2/requests/c-none`), 405, "method not allowed: GET /v2/requests/c-none; use DELETE");
    assert.equal(await metric(server.url, "shoal_requests_cancelled_total", { by: "id" }), before + 2);
    // The running one finished in its worker (its answer dropped); the queued one never ran.
    await sleep(900);
    assert.equal((await post(url, {}, { "x-request-id": "c-after" })).status, 200);
    assert.deepEqual(seen("c-"), ["c-run", "c-after"]);
  });

  test("a gRPC call its client cancels leaves the queue at once: never computed, counted", async () => {
    const url = `${server.url}/v2/models/recorder/infer`;
    const blocker = post(url, { inputs: [{ name: "x", datatype: "INT32", shape: [1], data: [1] }], parameters: { tag: "g-block", sleep: 500 } });
    await until("the model's blocker to reach forward()", "g-block");
    const before = (await metric(server.url, "shoal_requests_cancelled_total", { by: "grpc" })) ?? 0;
    const request = { model_name: "recorder", parameters: { tag: { string_param: "g-cancelled" } }, inputs: [{ name: "x", datatype: "INT32", shape: [1], contents: { int_contents: [1] } }] };
    const ended = new Promise<number>((resolve) => {
      const call = client.client.ModelInfer(request, new grpc.Metadata(), {}, (err: { code: number } | null) => resolve(err?.code ?? 0));
      void waitForMetric(server.url, "shoal_stage_queue_depth", { model: "recorder" }, (depth) => depth === 1).then(() => call.cancel());
    });
    assert.equal(await ended, grpc.status.CANCELLED);
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "recorder" }, (depth) => depth === 0);
    assert.equal(await metric(server.url, "shoal_requests_cancelled_total", { by: "grpc" }), before + 1);
    assert.equal((await blocker).status, 200);
    await post(url, { inputs: [{ name: "x", datatype: "INT32", shape: [1], data: [1] }], parameters: { tag: "g-after" } });
    assert.deepEqual(seen("g-"), ["g-block", "g-after"]);
  });

  test("a cancel by id stops a running stream between chunks", async () => {
    const res = await fetch(`${server.url}/ticks`, { method: "POST", body: JSON.stringify({ n: 100 }), headers: { "content-type": "application/json", accept: "text/event-stream", "x-request-id": "t-stream" } });
    assert.equal(res.status, 200);
    await until("the stream's third chunk", "t-stream:2");
    const done = await send(`${server.url}/v2/requests/t-stream`, { method: "DELETE", headers: { authorization: `Bearer ${TOKEN}` } });
    assert.deepEqual(done.json, { cancelled: 1 });
    const text = await res.text();
    assert.match(text, /cancelled: request t-stream was cancelled/);
    const made = seen("t-stream:").length;
    await sleep(300);
    assert.ok(seen("t-stream:").length <= made + 1, `the worker stopped: ${seen("t-stream:").length} chunks`);
    assert.ok(made < 100);
  });
});

describe("a cancel by id while model control is off", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("priorities.ts"), { args: ["--workers", "1"] });
  });
  after(async () => {
    await server?.stop();
  });

  test("is refused with 403, as load and unload are", async () => {
    assertError(await send(`${server.url}/v2/requests/any`, { method: "DELETE" }), 403, "forbidden: model control is off; start the server with --model-control explicit to cancel requests by id");
  });
});
