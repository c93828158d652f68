/**
 * Connections during a drain: an answer given after SIGTERM says `connection: close`, so that a
 * client does not send its next request on a connection the stopping server is about to close
 * (it opens a new one and gets 503, or finds the port closed); a request sent on a kept-alive
 * connection during the drain is answered 503, not cut off; a request that arrived before the
 * signal is waited for from its first byte, its head or body still arriving included, and one
 * still sending at the drain's deadline gets its 503.
 */
import assert from "node:assert/strict";
import { Agent, request } from "node:http";
import { connect } from "node:net";
import { describe, it } from "node:test";
import { fixture, NODE_HTTP_ONLY, rawRequest, sleep, startServer, waitForMetrics, type ServerProcess } from "./helpers.js";

const LIFE = fixture("lifecycle.ts");

/** A POST on `agent`: the status, the `connection` header, and the local port of its socket. */
function postOn(agent: Agent, url: string, body: unknown): Promise<{ status: number; connection: string | undefined; localPort: number | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, localPort: req.socket?.localPort }));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/**
 * Starts a POST of `body` on a connection of its own and sends only its first half; resolves
 * once the server holds the half's bytes (it has the request and is reading its body). The body
 * is padded to 200 kB: a runtime may read a small body whole, holding nothing until it is in.
 */
async function halfSent(server: ServerProcess, body: object): Promise<{ rest: () => void; response: ReturnType<typeof rawRequest>["response"] }> {
  const bytes = Buffer.from(JSON.stringify({ ...body, pad: "x".repeat(200_000) }));
  const half = bytes.length >> 1;
  const upload = rawRequest(server.port, "/inference", { headers: { "content-type": "application/json", "content-length": bytes.length }, body: bytes.subarray(0, half), end: false });
  await waitForMetrics(server.url, "the upload's body to be read", (read) => (read("shoal_request_bytes_in_flight") ?? 0) >= half);
  return { rest: () => upload.req.end(bytes.subarray(half)), response: upload.response };
}

describe("connections during a drain", () => {
  it("an answer given after SIGTERM closes its connection; a request on a kept-alive connection gets 503, not a reset", async () => {
    const server = await startServer(LIFE);
    const slow = new Agent({ keepAlive: true, maxSockets: 1 });
    const idle = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A connection kept alive and idle when the signal comes.
      const before = await postOn(idle, `${server.url}/inference`, { n: 0 });
      assert.equal(before.status, 200);
      // HTTP/1.1 keeps a connection alive unless told otherwise; node:http says so, Bun does not.
      assert.notEqual(before.connection, "close");
      const inFlight = postOn(slow, `${server.url}/inference`, { n: 1, sleepMs: 800 });
      await waitForMetrics(server.url, "the slow request to be accepted", (read) => read("shoal_requests_in_flight") === 1);
      server.proc.kill("SIGTERM");
      await server.waitForLog((l) => l.msg === "draining");
      const reused = await postOn(idle, `${server.url}/inference`, { n: 2 });
      assert.equal(reused.status, 503, "the idle kept-alive connection is answered");
      assert.equal(reused.localPort, before.localPort, "on the same connection");
      assert.equal(reused.connection, "close");
      const answered = await inFlight;
      assert.equal(answered.status, 200);
      assert.equal(answered.connection, "close", "the accepted request's answer ends its connection");
      assert.equal(await server.exitCode(), 0, server.describe());
    } finally {
      slow.destroy();
      idle.destroy();
      await server.stop();
    }
  });

  it("a request whose body is still arriving at SIGTERM is waited for, and answered once its body is in", async () => {
    const server = await startServer(LIFE, { args: ["--timeout", "10000"] });
    try {
      const upload = await halfSent(server, { n: 7 });
      const inFlight = postOn(new Agent(), `${server.url}/inference`, { n: 1, sleepMs: 300 });
      await waitForMetrics(server.url, "the other request to be accepted", (read) => read("shoal_requests_in_flight") === 1);
      server.proc.kill("SIGTERM");
      await server.waitForLog((l) => l.msg === "draining");
      assert.equal((await inFlight).status, 200);
      // Longer than the drain used to wait for requests that were not yet accepted, and than the
      // port's closing lingers on a connection still receiving.
      await sleep(2000);
      assert.equal(server.exited, false, "the server waits for the upload");
      upload.rest();
      const answer = await upload.response;
      assert.equal(answer.status, 200, answer.text);
      assert.equal(JSON.parse(answer.text).n, 7);
      assert.equal(answer.headers.connection, "close");
      assert.equal(await server.exitCode(), 0, server.describe());
    } finally {
      await server.stop();
    }
  });

  it("a request still sending its body at the drain's deadline gets 503 with connection: close, not a reset", async () => {
    // The drain's deadline is --timeout from the signal.
    const server = await startServer(LIFE, { args: ["--timeout", "1500"] });
    try {
      const upload = await halfSent(server, { n: 8 });
      server.proc.kill("SIGTERM");
      const signalled = performance.now();
      await server.waitForLog((l) => l.msg === "draining");
      const answer = await upload.response;
      assert.equal(answer.status, 503, answer.text);
      assert.deepEqual(JSON.parse(answer.text), { error: "service unavailable: the server is shutting down" });
      assert.equal(answer.headers.connection, "close");
      assert.ok(performance.now() - signalled >= 1000, "answered at the deadline, not before");
      assert.equal(await server.exitCode(), 0, server.describe());
    } finally {
      await server.stop();
    }
  });

  it("a request whose head is still arriving at SIGTERM is waited for and served: it arrived with its first byte", { skip: NODE_HTTP_ONLY }, async () => {
    const server = await startServer(LIFE, { args: ["--timeout", "10000"] });
    const socket = connect(server.port, "127.0.0.1");
    try {
      let text = "";
      socket.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.on("error", () => {});
      const body = JSON.stringify({ n: 9 });
      const head = `POST /inference HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
      socket.write(head.slice(0, 20));
      await sleep(300);
      server.proc.kill("SIGTERM");
      await server.waitForLog((l) => l.msg === "draining");
      await sleep(2000);
      assert.equal(server.exited, false, "the server waits for the request");
      socket.write(head.slice(20) + body);
      await closed;
      assert.match(text, /^HTTP\/1\.1 200 /, text);
      assert.match(text, /connection: close/i);
      assert.match(text, /"n":9/);
      assert.equal(await server.exitCode(), 0, server.describe());
    } finally {
      socket.destroy();
      await server.stop();
    }
  });
});
