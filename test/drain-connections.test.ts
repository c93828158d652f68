/**
 * Connections during a drain: an answer given after SIGTERM says `connection: close`, so that a
 * client does not send its next request on a connection the stopping server is about to close
 * (it opens a new one and gets 503, or finds the port closed); a request sent on a kept-alive
 * connection during the drain is answered 503, not cut off.
 */
import assert from "node:assert/strict";
import { Agent, request } from "node:http";
import { describe, it } from "node:test";
import { fixture, startServer, waitForMetrics } from "./helpers.js";

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
});
