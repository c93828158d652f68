/**
 * A Mosec server written for Mosec (test/fixtures/python/mosec_server.py) with one import changed,
 * `from shoal.mosec import ...`, run as Mosec's are: `python server.py --port ...` starts Shoal's
 * front with its stages as Python process workers. Two stages with pickle between them (Mosec's
 * default), batching, Mosec's errors (bare text), an SSEWorker's events, and a clean stop on SIGTERM.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, RUNTIME, fixture, post, startCommand } from "./helpers.js";
import { pythonSdk } from "./python-helpers.js";

const sdk = pythonSdk();

describe("a Mosec server on Shoal", { skip: sdk.skip ?? false }, () => {
  let proc: ChildProcess;
  let url: string;

  before(async () => {
    const env = { SHOAL_CLI: join(ROOT, "dist", "cli", "main.js"), SHOAL_NODE: RUNTIME === "bun" ? "bun" : process.execPath };
    const started = await startCommand("python" in sdk ? sdk.python : "", [fixture("python/mosec_server.py"), "--port", "0", "--address", "127.0.0.1"], ROOT, 60_000, env);
    proc = started.proc;
    url = `http://127.0.0.1:${started.port}`;
  });
  after(() => {
    if (proc.exitCode === null) proc.kill("SIGKILL");
  });

  test("two stages, pickle between them, and the second batches the requests of several clients", async () => {
    const replies = await Promise.all(Array.from({ length: 16 }, (_, i) => post(`${url}/inference`, { x: i })));
    replies.forEach((reply, i) => {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.y, 2 * i);
    });
    assert.ok(Math.max(...replies.map((r) => r.json.batch as number)) > 1, "no batch held two requests");
  });

  test("Mosec's errors keep their statuses, their text bare as Mosec's", async () => {
    const missing = await post(`${url}/inference`, { y: 1 });
    assert.equal(missing.status, 422);
    assert.equal(missing.text, "request validation error: cannot find key 'x'");
    const bad = await post(`${url}/inference`, "{not json");
    assert.equal(bad.status, 400);
    assert.match(bad.text, /^decoding error: JSON decode error/);
  });

  test("an SSEWorker's events, sent from forward() with send_stream_event", async () => {
    const res = await fetch(`${url}/sse`, { method: "POST", body: JSON.stringify({ n: 3 }) });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(await res.text(), "data: event 0\n\ndata: event 1\n\ndata: event 2\n\n");
    // An error of a stream's request is the stream's one event, as Mosec's.
    const failed = await post(`${url}/sse`, { n: 0 });
    assert.equal(failed.status, 200);
    assert.equal(failed.text, "event: error\ndata: SSE inference error: 422: Unprocessable Content: request validation error: n must be 1 or more\n\n");
  });

  test("SIGTERM to `python server.py` drains the front and both exit", async () => {
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    proc.kill("SIGTERM");
    assert.equal(await exited, 0);
  });
});
