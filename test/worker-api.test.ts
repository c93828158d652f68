/** What a Worker can rely on: request metadata, its identity, init() before work, its environment. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fixture, post, startServer, type ServerProcess } from "./helpers.js";

const TIMEOUT_MS = 4000;
const INIT_MS = 1000;

describe("the Worker API", () => {
  let server: ServerProcess;
  before(async () => {
    // Do not wait for "ready": the first test sends work while init() is still running.
    server = await startServer(fixture("worker-api.ts"), { args: ["--timeout", String(TIMEOUT_MS)], env: { INIT_MS: String(INIT_MS) }, waitReady: false });
  });
  after(async () => {
    await server?.stop();
  });

  test("a request sent while init() runs waits for it: forward() never runs before init() is done", async () => {
    assert.equal(server.logs().find((l) => l.msg === "ready"), undefined, "sent before the workers were ready");
    const reply = await post(`${server.url}/loader`, {});
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.loaded, true);
    await server.waitForLog((l) => l.msg === "ready");
  });

  test("workerId is 1..num and stage is the stage name, both set before init(); env is per worker", async () => {
    // Both workers are idle now; concurrent slow requests reach both.
    const replies = await Promise.all([0, 1, 2, 3].map(() => post(`${server.url}/loader`, { sleep: 300 })));
    const ids = new Set<number>();
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      const { workerId, stage, seenInInit, tag, idInConstructor } = reply.json;
      assert.ok(workerId === 1 || workerId === 2, `workerId ${workerId}`);
      ids.add(workerId);
      assert.equal(stage, "Loader_2");
      assert.deepEqual(seenInInit, { workerId, stage: "Loader_2", maxBatchSize: 1 });
      // As documented: not yet set inside the constructor.
      assert.equal(idInConstructor, 0);
      assert.equal(tag, workerId === 1 ? "first" : "second", "env[workerId - 1] is this worker's environment");
    }
    assert.deepEqual([...ids].sort(), [1, 2]);
  });

  test("forward() reads the request id, headers, deadline and route", async () => {
    const sent = Date.now();
    const reply = await post(`${server.url}/meta`, { any: 1 }, { "x-request-id": "meta-123", "X-Custom": "hello" });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.requestId, "meta-123");
    assert.equal(reply.headers.get("x-request-id"), "meta-123");
    assert.equal(reply.json.custom, "hello", "header names are lower-cased");
    assert.equal(reply.json.route, "/meta");
    // The deadline is an epoch time in ms, --timeout after arrival.
    const left = reply.json.deadline - sent;
    assert.ok(left > TIMEOUT_MS - 1000 && left <= TIMEOUT_MS + 1000, `deadline ${left} ms after sending, for --timeout ${TIMEOUT_MS}`);
  });

  test("a generated request id reaches forward() and the response header alike", async () => {
    const reply = await post(`${server.url}/meta2`, {});
    assert.equal(reply.status, 200, reply.text);
    assert.match(reply.json.requestId, /^[0-9a-f-]{36}$/);
    assert.equal(reply.headers.get("x-request-id"), reply.json.requestId);
    assert.equal(reply.json.route, "/meta2");
    assert.equal(reply.json.custom, null);
    assert.equal(reply.json.query, null, "no query string, no query");
  });

  test("forward() reads the URL's query string, and the route is found without it", async () => {
    const reply = await post(`${server.url}/meta?k=3&label=a%20b`, {});
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.route, "/meta");
    assert.equal(reply.json.query, "k=3&label=a%20b");
    assert.equal(new URLSearchParams(reply.json.query).get("label"), "a b");
    assert.equal((await post(`${server.url}/meta?`, {})).json.query, null, "an empty query string is none");
  });
});
