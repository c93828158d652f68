/** Every status of the error table, as a client sees it. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { RecordFile, assertError, fixture, post, rawRequest, send, startServer, type ServerProcess } from "./helpers.js";

const MAX_REQUEST_SIZE = 1024;
const CAPACITY = 2;

describe("the error table", () => {
  let server: ServerProcess;
  const calls = new RecordFile();
  before(async () => {
    server = await startServer(fixture("errors.ts"), {
      args: ["--timeout", "5000", "--capacity", String(CAPACITY), "--max-request-size", String(MAX_REQUEST_SIZE)],
      env: { RECORD_FILE: calls.path },
    });
  });
  after(async () => {
    await server?.stop();
    calls.remove();
  });

  test("a body that is not JSON is a 400 decoding error", async () => {
    const reply = await post(`${server.url}/echo`, '{"x": 1,');
    assertError(reply, 400, /^decoding error: \S/);
  });

  test("a body that is not UTF-8 is a 400 decoding error", async () => {
    const reply = await post(`${server.url}/echo`, new Uint8Array([0x22, 0xff, 0xfe, 0x22]));
    assertError(reply, 400, /^decoding error: \S/);
  });

  test("an empty body is a 400", async () => {
    const reply = await post(`${server.url}/echo`, "");
    assertError(reply, 400, "bad request: empty request body");
  });

  test("a ClientError is a 400 with its message", async () => {
    const reply = await post(`${server.url}/echo`, { kind: "client" });
    assertError(reply, 400, "bad request: field 'kind' says so");
  });

  test("a ValidationError is a 422 with its message", async () => {
    const reply = await post(`${server.url}/echo`, { kind: "validation" });
    assertError(reply, 422, "request validation error: 'x' must be a number");
  });

  test("a ServerError is a 500 with its message", async () => {
    const reply = await post(`${server.url}/echo`, { kind: "server" });
    assertError(reply, 500, "internal error: the model file is missing");
  });

  test("a result the codec cannot encode is a 500 encoding error", async () => {
    const reply = await post(`${server.url}/echo`, { kind: "unencodable" });
    assertError(reply, 500, /^encoding error: .*BigInt/);
  });

  for (const kind of ["crash", "returned"]) {
    test(`an unexpected error (${kind === "crash" ? "thrown" : "returned"}) is a bare 500; its text goes to the log only`, async () => {
      const secret = `secret-${randomUUID()}`;
      const requestId = `unexpected-${kind}`;
      const reply = await post(`${server.url}/echo`, { kind, secret }, { "x-request-id": requestId });
      assertError(reply, 500, "inference internal error");
      assert.equal(reply.text, '{"error":"inference internal error"}');
      assert.ok(!reply.text.includes(secret));
      const line = await server.waitForLog((l) => JSON.stringify(l).includes(secret));
      assert.equal(line.requestId, requestId, JSON.stringify(line));
      assert.ok((line.level as number) >= 50, `logged as an error: ${JSON.stringify(line)}`);
    });
  }

  test("the worker keeps serving after its requests failed", async () => {
    const reply = await post(`${server.url}/echo`, { hello: "again" });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { echo: { hello: "again" } });
    assert.equal(reply.headers.get("content-type"), "application/json");
  });

  test("a full stage queue refuses with 429, and a refused request never reaches forward()", async () => {
    // One worker busy with the first request, CAPACITY queued behind it, the rest refused.
    const ids = Array.from({ length: 6 }, (_, i) => `full-${i}`);
    const replies = await Promise.all(ids.map((id) => post(`${server.url}/slow`, { ms: 500 }, { "x-request-id": id })));
    const served = ids.filter((_, i) => replies[i]!.status === 200);
    const refused = ids.filter((_, i) => replies[i]!.status === 429);
    assert.equal(served.length, 1 + CAPACITY, replies.map((r) => `${r.status} ${r.text}`).join("\n"));
    assert.equal(refused.length, ids.length - served.length);
    for (const reply of replies) {
      if (reply.status === 429) assertError(reply, 429, "too many requests: the queue of stage Slow_2 is full");
      else assert.deepEqual(reply.json, { id: reply.headers.get("x-request-id") });
    }
    const seen = calls.lines().filter((l) => l.startsWith("full-"));
    assert.deepEqual(seen.sort(), served.sort(), "forward() ran exactly for the requests answered 200");
  });

  test("the queue takes requests again once it has room", async () => {
    const reply = await post(`${server.url}/slow`, { ms: 1 }, { "x-request-id": "after-full" });
    assert.equal(reply.status, 200, reply.text);
  });

  test("a body declared over --max-request-size is a 413", async () => {
    const body = Buffer.alloc(4 * MAX_REQUEST_SIZE, "a");
    const { response } = rawRequest(server.port, "/echo", { headers: { "content-type": "application/json", "content-length": body.length }, body });
    const res = await response;
    assert.equal(res.status, 413, res.text);
    assert.equal(res.headers["content-type"], "application/json");
    assert.ok(res.headers["x-request-id"]);
    assert.deepEqual(JSON.parse(res.text), { error: `request body is too large: the limit is ${MAX_REQUEST_SIZE} bytes` });
  });

  test("a body declared within the bounds of what is read and dropped is read to its end and answered 413", async () => {
    // The limit and as much again (at least 1 MiB) past it, counted from the body's first byte.
    const body = Buffer.alloc(MAX_REQUEST_SIZE + Math.max(MAX_REQUEST_SIZE, 1024 * 1024), "a");
    const { response } = rawRequest(server.port, "/echo", { headers: { "content-type": "application/json", "content-length": body.length }, body });
    const res = await response;
    assert.equal(res.status, 413, res.text);
    assert.deepEqual(JSON.parse(res.text), { error: `request body is too large: the limit is ${MAX_REQUEST_SIZE} bytes` });
  });

  test("a streamed body that grows over --max-request-size is a 413, read in full by a client that keeps sending", async () => {
    // Chunked, so the server only learns the size while reading. The client sends all of it before
    // it reads: the server drops the rest and answers at the end instead of resetting the socket.
    for (let round = 0; round < 5; round++) {
      const { req, response } = rawRequest(server.port, "/echo", { headers: { "content-type": "application/json", "transfer-encoding": "chunked" }, end: false });
      const chunk = Buffer.alloc(256, "a");
      for (let sent = 0; sent < 32 * MAX_REQUEST_SIZE; sent += chunk.length) {
        if (!req.write(chunk)) await new Promise((resolve) => req.once("drain", resolve));
      }
      req.end();
      const res = await response;
      assert.equal(res.status, 413, res.text);
      assert.deepEqual(JSON.parse(res.text), { error: `request body is too large: the limit is ${MAX_REQUEST_SIZE} bytes` });
    }
  });

  test("a client that goes on sending far past the limit is answered and cut off", async () => {
    const { req, response } = rawRequest(server.port, "/echo", { headers: { "content-type": "application/json", "transfer-encoding": "chunked" }, end: false });
    const closed = new Promise((resolve) => req.on("close", resolve));
    req.on("error", () => {});
    const chunk = Buffer.alloc(64 * 1024, "a");
    let sent = 0;
    while (!req.destroyed && sent < 64 * 1024 * 1024) {
      if (!req.write(chunk)) await Promise.race([new Promise((resolve) => req.once("drain", resolve)), closed]);
      sent += chunk.length;
    }
    await closed;
    assert.ok(sent < 64 * 1024 * 1024, `the server read all ${sent} bytes`);
    // The answer races the reset of a socket still being written to; when it arrives, it is the 413.
    const res = await response.catch((err: NodeJS.ErrnoException) => err);
    if (res instanceof Error) assert.match(String(res.code), /EPIPE|ECONNRESET/);
    else assert.equal(res.status, 413);
  });

  test("a body declared far past the limit is refused before it is sent", async () => {
    const { req, response } = rawRequest(server.port, "/echo", { headers: { "content-type": "application/json", "content-length": 1024 * 1024 * 1024 }, end: false });
    req.flushHeaders();
    const res = await response;
    assert.equal(res.status, 413, res.text);
    assert.equal(res.headers.connection, "close");
    req.destroy();
  });

  test("a body of exactly --max-request-size bytes is accepted", async () => {
    const prefix = '{"pad":"';
    const body = `${prefix}${"p".repeat(MAX_REQUEST_SIZE - prefix.length - 2)}"}`;
    assert.equal(Buffer.byteLength(body), MAX_REQUEST_SIZE);
    const reply = await post(`${server.url}/echo`, body);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.echo.pad.length, MAX_REQUEST_SIZE - prefix.length - 2);
  });

  test("after refusing large bodies the server still answers normal requests", async () => {
    const reply = await post(`${server.url}/echo`, { after: 413 });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { echo: { after: 413 } });
  });

  test("an unknown path is a 404", async () => {
    assertError(await post(`${server.url}/nope`, { x: 1 }), 404, "not found: /nope");
    assertError(await send(`${server.url}/echo/extra`), 404, "not found: /echo/extra");
  });

  test("a route answers other methods than POST with 405 and Allow: POST", async () => {
    for (const method of ["GET", "PUT", "DELETE"]) {
      const reply = await send(`${server.url}/echo`, { method });
      assertError(reply, 405, `method not allowed: ${method} /echo; use POST`);
      assert.equal(reply.headers.get("allow"), "POST");
    }
  });

  test("a query string does not change the route", async () => {
    const reply = await post(`${server.url}/echo?verbose=1`, { q: true });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { echo: { q: true } });
  });

  test("every answer carries the client's x-request-id", async () => {
    const cases: [string, RequestInit][] = [
      ["/echo", { method: "POST", body: '{"ok":1}' }],
      ["/echo", { method: "POST", body: "{" }],
      ["/echo", { method: "POST", body: '{"kind":"validation"}' }],
      ["/echo", { method: "POST", body: '{"kind":"crash"}' }],
      ["/echo", { method: "GET" }],
      ["/nope", { method: "POST", body: "{}" }],
    ];
    for (const [path, init] of cases) {
      const id = `client-${randomUUID()}`;
      const reply = await send(`${server.url}${path}`, { ...init, headers: { "x-request-id": id } });
      assert.equal(reply.headers.get("x-request-id"), id, `${init.method} ${path} -> ${reply.status}`);
    }
  });

  test("without a usable x-request-id the server makes a fresh one for each request", async () => {
    const a = await post(`${server.url}/echo`, { n: 1 });
    const b = await post(`${server.url}/echo`, { n: 2 });
    const c = await post(`${server.url}/echo`, { n: 3 }, { "x-request-id": "x".repeat(500) });
    const ids = [a, b, c].map((r) => r.headers.get("x-request-id"));
    for (const id of ids) assert.match(id ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(new Set(ids).size, 3);
  });
});
