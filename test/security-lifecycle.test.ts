/**
 * Start-up survives worker deaths: a worker killed while it starts is restarted, a ready worker
 * that dies while a sibling still starts is replaced, and only the user's code failing the same
 * way twice (or too many attempts) ends start-up, answering what was accepted with 503. And a
 * stage with no live worker lets its timed-out requests go.
 */
import assert from "node:assert/strict";
import { after, afterEach, beforeEach, describe, test } from "node:test";
import { assertError, fixture, metric, post, RecordFile, sample, send, startServer, waitFor, type Reply, type ServerProcess } from "./helpers.js";

const STARTUP = fixture("startup.ts");

/** Resolves once the server holds `n` accepted requests. */
async function accepted(server: ServerProcess, n: number): Promise<void> {
  for (const end = Date.now() + 10_000; (await metric(server.url, "shoal_requests_in_flight")) !== n; ) {
    if (Date.now() > end) throw new Error(`the server never held ${n} requests\n${server.describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The pids the record file shows for `event` ("init" or "ready") of worker `workerId`. */
function pids(rec: RecordFile, event: string, workerId: number): number[] {
  return rec
    .lines()
    .map((line) => line.split(" "))
    .filter(([e, id]) => e === event && Number(id) === workerId)
    .map(([, , pid]) => Number(pid));
}

describe("start-up survives worker deaths", () => {
  let rec: RecordFile;
  let server: ServerProcess | undefined;
  beforeEach(() => {
    rec = new RecordFile();
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    rec.remove();
  });

  test("kill -9 of a process worker in init(): the server stays up and answers what it accepted meanwhile", async () => {
    server = await startServer(STARTUP, { waitReady: false, env: { INIT_MS: "3000", RECORD_FILE: rec.path }, args: ["--timeout", "60000"] });
    const [pid] = await waitFor("worker 1 to start", () => (pids(rec, "init", 1).length > 0 ? pids(rec, "init", 1) : undefined));
    const early = [post(`${server.url}/inference`, {}), post(`${server.url}/inference`, {})];
    await accepted(server, 2);
    process.kill(pid!, "SIGKILL");
    const replies = await Promise.all(early);
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      assert.notEqual(reply.json.pid, pid, "answered by the replacement");
    }
    assert.ok(!pids(rec, "ready", 1).includes(pid!), "it was killed before it was ready");
    assert.equal(server.exited, false);
    await server.waitForLog((l) => l.msg === "ready", 20_000);
    assert.equal((await send(`${server.url}/readyz`)).status, 200);
  });

  test("a ready worker that crashes while its sibling is in init(): replaced, the sibling becomes ready", async () => {
    server = await startServer(STARTUP, { waitReady: false, env: { NUM: "2", INIT_MS_2: "12000", RECORD_FILE: rec.path }, args: ["--timeout", "30000"] });
    await waitFor("worker 1 to be ready", () => (pids(rec, "ready", 1).length > 0 ? true : undefined), 20_000);
    const served = await post(`${server.url}/inference`, {});
    assert.equal(served.status, 200, served.text);
    assert.equal(served.json.worker, 1, "the ready worker serves during start-up");
    assert.equal(pids(rec, "ready", 2).length, 0, "worker 2 is still in init()");
    assertError(await post(`${server.url}/inference`, { poison: true }), 500, /^worker died/);
    await server.waitForLog((l) => l.msg === "ready", 30_000);
    assert.equal(server.exited, false);
    const later: Reply[] = await Promise.all(Array.from({ length: 8 }, () => post(`${server!.url}/inference`, {})));
    for (const reply of later) assert.equal(reply.status, 200, reply.text);
    assert.equal(pids(rec, "ready", 1).length, 2, "worker 1 was replaced");
    assert.equal((await send(`${server.url}/readyz`)).status, 200);
  });

  test("init() throwing the same error twice: exit 1 with one line, and the request accepted meanwhile gets 503", async () => {
    server = await startServer(STARTUP, { waitReady: false, env: { INIT_MS: "1500", FAIL: "same" }, args: ["--timeout", "60000"] });
    const pending = post(`${server.url}/inference`, {});
    await accepted(server, 1);
    const reply = await pending;
    assertError(reply, 503, "service unavailable: the server could not start");
    assert.equal(await server.exitCode(), 1);
    const lines = server.stderr.trim().split("\n");
    assert.equal(lines.length, 1, server.stderr);
    assert.match(lines[0]!, /^shoal: Starting_1 worker 1 could not start: no weights in \/models\/missing/);
    const starts = server.logs().filter((l) => l.msg === "worker failed to start");
    assert.equal(starts.length, 2, "it was tried twice");
  });

  test("init() failing a new way each time: start-up ends after 5 attempts", async () => {
    server = await startServer(STARTUP, { waitReady: false, env: { FAIL: "varied" } });
    assert.equal(await server.exitCode(), 1);
    assert.match(server.stderr, /^shoal: Starting_1 worker 1 could not start in 5 attempts: no device free at \d+\n$/);
  });
});

describe("a stage with no live worker", () => {
  let server: ServerProcess | undefined;
  after(() => server?.stop());

  test("a request times out 408 and the queue depth returns to 0", async () => {
    server = await startServer(STARTUP, { waitReady: false, env: { INIT_MS: "30000" }, args: ["--timeout", "1000", "--capacity", "1"] });
    for (let i = 0; i < 3; i++) {
      const reply = await post(`${server.url}/inference`, {});
      assertError(reply, 408, /^request timeout/);
    }
    const text = (await send(`${server.url}/metrics`)).text;
    assert.equal(sample(text, "shoal_stage_live_workers", { stage: "Starting_1" }), 0);
    assert.equal(sample(text, "shoal_stage_queue_depth", { stage: "Starting_1" }), 0);
    assert.equal(sample(text, "shoal_requests_in_flight"), 0);
  });
});
