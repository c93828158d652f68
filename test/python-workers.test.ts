/**
 * Python stages (python/, the `shoal-worker` SDK) served by Shoal: the protocol's test vectors
 * checked by the SDK's own tests, batches with per-item errors, Python and TypeScript stages in
 * one pipeline both ways (typed arrays as numpy arrays), streams and their cancellation, logs
 * and metrics, a worker killed with SIGKILL under load, and a worker that cannot start.
 * test/fixtures/python-server.ts and test/fixtures/python/workers.py.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, assertError, metric, post, runToExit, sleep, startServer, waitForMetric, type ServerProcess } from "./helpers.js";
import { pythonSdk } from "./python-helpers.js";

const sdk = pythonSdk();
const SERVER = "test/fixtures/python-server.ts";

describe("Python workers", { skip: sdk.skip ?? false }, () => {
  const python = "python" in sdk ? sdk.python : "";
  let server: ServerProcess;

  before(async () => {
    server = await startServer(SERVER, { env: { TEST_PYTHON: python }, startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  test("the SDK decodes every vector of the protocol and writes the worker's ones byte for byte", () => {
    const out = execFileSync(python, ["-m", "pytest", "-q", "-p", "no:cacheprovider", join(ROOT, "python", "tests")], { cwd: ROOT, encoding: "utf8" });
    assert.match(out, /\d+ passed/);
    assert.doesNotMatch(out, /failed|error/);
  });

  test("a batched Python stage: concurrent requests share batches, and a bad item fails alone", async () => {
    const xs = Array.from({ length: 24 }, (_, i) => (i === 5 ? -1 : i));
    const replies = await Promise.all(xs.map((x) => post(`${server.url}/double`, { x })));
    replies.forEach((reply, i) => {
      if (xs[i] === -1) return assertError(reply, 422, "request validation error: x is -1: it must be 0 or more");
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.y, 2 * xs[i]!);
    });
    const batches = replies.filter((r) => r.status === 200).map((r) => r.json.batch as number);
    assert.ok(Math.max(...batches) > 1, `no batch held two requests: ${batches}`);
    assert.ok(Math.max(...batches) <= 8, `a batch above maxBatchSize: ${batches}`);
  });

  test("a body Python cannot decode is a 400, and a wrong shape a 422", async () => {
    assertError(await post(`${server.url}/double`, "not json"), 400, /^decoding error: the body is not JSON/);
    assertError(await post(`${server.url}/double`, { y: 1 }), 422, "request validation error: 'x' must be a number");
  });

  test("TypeScript -> Python -> TypeScript: a Float32Array crosses as a numpy array and comes back typed", async () => {
    const reply = await post(`${server.url}/scale`, { n: 5 });
    assert.equal(reply.status, 200, reply.text);
    // 3 × (0 + 0.5 + 1 + 1.5 + 2)
    assert.deepEqual(reply.json, { type: "Float32Array", length: 5, sum: 15 });
  });

  test("Python -> TypeScript: a numpy float32 array arrives as a Float32Array", async () => {
    const reply = await post(`${server.url}/embed`, { n: 4 });
    assert.deepEqual(reply.json, { type: "Float32Array", length: 4, sum: 3 });
    assertError(await post(`${server.url}/embed`, { n: -2 }), 422, "request validation error: 'n' must be a whole number");
  });

  test("a Python generator streams as Server-Sent Events, or is gathered for a client that takes one answer", async () => {
    const res = await fetch(`${server.url}/spell`, { method: "POST", headers: { accept: "text/event-stream" }, body: JSON.stringify({ text: "fish" }) });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const events = (await res.text()).split("\n\n").filter((e) => e !== "").map((e) => JSON.parse(e.replace(/^data: /, "")).letter);
    assert.deepEqual(events, ["f", "i", "s", "h"]);
    const whole = await post(`${server.url}/spell`, { text: "ok" }, { accept: "application/json" });
    assert.deepEqual(whole.json, [{ letter: "o" }, { letter: "k" }]);
  });

  test("a client that leaves a stream frees the Python worker: the next request starts at once", async () => {
    const leaving = new AbortController();
    const res = await fetch(`${server.url}/spell`, { method: "POST", headers: { accept: "text/event-stream" }, body: JSON.stringify({ text: "x".repeat(400), pause: 0.02 }), signal: leaving.signal });
    const reader = res.body!.getReader();
    await reader.read();
    leaving.abort();
    // Left running, the 400 letters would hold the one worker for 8 s.
    const started = performance.now();
    const next = await post(`${server.url}/spell`, { text: "hi" }, { accept: "application/json" });
    assert.deepEqual(next.json, [{ letter: "h" }, { letter: "i" }]);
    assert.ok(performance.now() - started < 4000, `the next stream waited ${Math.round(performance.now() - started)} ms`);
  });

  test("a client that reads slower than a Python stream pauses its generator until it catches up", async () => {
    const n = 400;
    const res = await fetch(`${server.url}/flood`, { method: "POST", headers: { accept: "application/x-ndjson" }, body: JSON.stringify({ n, size: 65_536 }) });
    const reader = res.body!.getReader();
    await reader.read();
    // The client reads nothing for a while: the generator stops once the socket and the
    // stream's buffer are full, far short of the 25 MiB it would make.
    await sleep(1500);
    const made = await metric(server.url, "flood_chunks_total", { stage: "Flood_8" });
    assert.ok(made !== undefined && made < n / 2, `the generator made ${made} of ${n} chunks for a client that read none`);
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const lines = text.split("\n").filter((l) => l.startsWith("{"));
    assert.equal(lines.at(-1) === undefined ? -1 : JSON.parse(lines.at(-1)!).i, n - 1);
  });

  test("a Python worker's log lines and metrics reach the server's", async () => {
    const line = server.logs().find((l) => l.msg === "double is up");
    assert.equal(line?.stage, "Double_1");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /double_batches_total\{stage="Double_1",worker="[12]"\} \d+/);
  });

  test("a Python worker killed with SIGKILL under load: every request answered once, the worker replaced", async () => {
    const first = await post(`${server.url}/double`, { x: 1 });
    const victim = first.json.pid as number;
    let killed = false;
    const load = Array.from({ length: 8 }, async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 15; i++) {
        const reply = await post(`${server.url}/double`, { x: i });
        if (reply.status === 200) assert.equal(reply.json.y, 2 * i);
        else assertError(reply, 500, /^worker died/);
        statuses.push(reply.status);
        if (!killed && statuses.length === 3) {
          killed = true;
          process.kill(victim, "SIGKILL");
        }
      }
      return statuses;
    });
    const statuses = (await Promise.all(load)).flat();
    assert.equal(statuses.length, 8 * 15);
    await waitForMetric(server.url, "shoal_stage_worker_restarts_total", { stage: "Double_1" }, (n) => n >= 1, 20_000);
    const after = await Promise.all(Array.from({ length: 8 }, (_, i) => post(`${server.url}/double`, { x: i })));
    for (const reply of after) assert.equal(reply.status, 200, reply.text);
    assert.ok(!after.some((r) => r.json.pid === victim), "an answer from the killed worker");
  });
});

describe("a Python worker that cannot start", { skip: sdk.skip ?? false }, () => {
  test("stops the server with the reason its init() raised", async () => {
    const exited = await runToExit(SERVER, ["--port", "0"], { TEST_PYTHON: "python" in sdk ? sdk.python : "", BROKEN: "1" }, 60_000);
    assert.notEqual(exited.code, 0);
    assert.match(exited.stdout + exited.stderr, /Broken_1 worker 1 could not start: RuntimeError: no model file at \/nowhere\/model.bin/);
  });
});
