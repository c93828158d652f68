/**
 * Production life cycle: readiness, warm-up, metrics, dry run, graceful drain, crash recovery.
 */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, describe, it } from "node:test";
import { fixture, post, RecordFile, runToExit, sample, send, sleep, startServer, waitForMetrics, type ServerProcess } from "./helpers.js";

const LIFE = fixture("lifecycle.ts");

async function metrics(server: ServerProcess): Promise<string> {
  const reply = await send(`${server.url}/metrics`);
  assert.equal(reply.status, 200);
  return reply.text;
}

describe("readiness and warm-up", () => {
  const rec = new RecordFile();
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.stop();
    rec.remove();
  });

  it("reports not ready while a slow init and the warm-up run, then ready", async () => {
    server = await startServer(LIFE, { waitReady: false, env: { INIT_MS: "1500", RECORD_FILE: rec.path } });
    const early = await send(`${server.url}/readyz`);
    assert.equal(early.status, 503);
    assert.equal(early.json.ready, false);
    assert.match(early.json.reason, /no live worker in Life_1/);
    assert.equal((await send(`${server.url}/healthz`)).status, 200, "liveness holds during start-up");
    await server.waitForLog((l) => l.msg === "ready", 20_000);
    const ready = await send(`${server.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.json, { ready: true });
    // The warm-up example ran in the worker after init and before it served.
    assert.deepEqual(rec.lines().slice(0, 2), ["init 1", "warm-up -1"]);
    assert.equal((await send(`${server.url}/`)).status, 200);
  });
});

describe("metrics", () => {
  let server: ServerProcess;
  after(() => server?.stop());

  it("counts requests by code, shows batches above 1, and a worker's own metric", async () => {
    server = await startServer(LIFE, { env: { BATCH: "8", WAIT_MS: "50" }, args: ["--namespace", "t"] });
    const replies = await Promise.all(
      Array.from({ length: 32 }, (_, n) => post(`${server.url}/inference`, { n, sleepMs: 30, invalid: n % 8 === 0 })),
    );
    assert.equal(replies.filter((r) => r.status === 200).length, 28);
    assert.equal(replies.filter((r) => r.status === 422).length, 4);
    const text = await metrics(server);
    assert.equal(sample(text, "t_requests_total", { route: "/inference", code: "200" }), 28);
    assert.equal(sample(text, "t_requests_total", { route: "/inference", code: "422" }), 4);
    assert.equal(sample(text, "t_request_duration_seconds_count", { route: "/inference" }), 32);
    const batches = sample(text, "t_stage_batch_size_count", { stage: "Life_1" })!;
    const ofOne = sample(text, "t_stage_batch_size_bucket", { stage: "Life_1", le: "1" })!;
    assert.equal(sample(text, "t_stage_batch_size_sum", { stage: "Life_1" }), 32);
    assert.ok(batches < 32 && ofOne < batches, `some batches hold more than one item (${batches} batches, ${ofOne} of one)`);
    assert.equal(sample(text, "t_stage_queue_wait_seconds_count", { stage: "Life_1" }), 32);
    assert.equal(sample(text, "t_stage_forward_duration_seconds_count", { stage: "Life_1" }), batches);
    assert.equal(sample(text, "t_stage_live_workers", { stage: "Life_1" }), 1);
    assert.equal(sample(text, "t_stage_worker_restarts_total", { stage: "Life_1" }), 0);
    assert.equal(sample(text, "t_requests_in_flight"), 0);
    assert.equal(sample(text, "t_stage_queue_depth", { stage: "Life_1" }), 0);
    // 32 items plus the warm-up example, reported by the worker within a second or so.
    let custom: number | undefined;
    for (let i = 0; i < 50 && custom !== 33; i++) {
      custom = sample(await metrics(server), "fixture_items_total", { stage: "Life_1", worker: "1" });
      if (custom !== 33) await sleep(100);
    }
    assert.equal(custom, 33);
  });
});

describe("dry run", () => {
  it("runs the example through the pipeline without opening a port, and exits 0", async () => {
    const run = await runToExit(LIFE, ["--dry-run", "--port", "1"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /\/inference: Life_1 [\d.]+ ms => 200, \d+ bytes of application\/json/);
    assert.doesNotMatch(run.stdout, /listening on/);
  });

  it("exits 1 with a message naming the worker and the example when the example fails", async () => {
    const run = await runToExit(LIFE, ["--dry-run"], { BAD_EXAMPLE: "1" });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /warm-up of Life_1 worker 1 failed on example 1 of 1 .*invalid on purpose/);
  });
});

describe("graceful drain", () => {
  it("answers every accepted request, refuses new ones with 503, exits 0 and frees the port", async () => {
    const server = await startServer(LIFE, { env: { BATCH: "4" } });
    const accepted = Array.from({ length: 12 }, (_, n) => post(`${server.url}/inference`, { n, sleepMs: 400 }));
    // Every one accepted: held, or already answered.
    await waitForMetrics(server.url, "the 12 requests to be accepted", (read) => (read("shoal_requests_in_flight") ?? 0) + (read("shoal_requests_total", { route: "/inference" }) ?? 0) === 12);
    server.proc.kill("SIGTERM");
    await server.waitForLog((l) => l.msg === "draining");
    const late = await post(`${server.url}/inference`, { n: 99 });
    assert.equal(late.status, 503);
    assert.equal((await send(`${server.url}/readyz`)).status, 503);
    assert.equal((await send(`${server.url}/`)).status, 503);
    const replies = await Promise.all(accepted);
    assert.deepEqual(replies.map((r) => r.status), Array(12).fill(200));
    assert.equal(await server.exitCode(), 0);
    // The port is free again.
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.once("error", reject);
      probe.listen(server.port, "127.0.0.1", () => probe.close(() => resolve()));
    });
  });
});

describe("crash recovery", () => {
  it("answers every request when a worker thread dies under load, and the stage serves again", async () => {
    const server = await startServer(LIFE, { env: { NUM: "2" } });
    try {
      const load = Array.from({ length: 40 }, (_, n) => post(`${server.url}/inference`, n === 10 ? { n, crash: "exit" } : { n, sleepMs: 20 }));
      const replies = await Promise.all(load);
      for (const r of replies) assert.ok(r.status === 200 || (r.status === 500 && /worker died/.test(r.json.error)), `${r.status} ${r.text}`);
      assert.equal(replies[10]!.status, 500, "the request that killed its worker fails");
      assert.ok(replies.every((r) => r.elapsedMs < 2900), "no request waited for its deadline");
      await server.waitForLog((l) => l.msg === "worker died; replacing it");
      const after = await post(`${server.url}/inference`, { n: 100 });
      assert.equal(after.status, 200);
      let live = 0;
      for (let i = 0; i < 50 && live !== 2; i++) {
        live = sample(await metrics(server), "shoal_stage_live_workers", { stage: "Life_1" }) ?? 0;
        if (live !== 2) await sleep(100);
      }
      assert.equal(live, 2);
      assert.equal(sample(await metrics(server), "shoal_stage_worker_restarts_total", { stage: "Life_1" }), 1);
    } finally {
      await server.stop();
    }
  });

  it("with num 1, an error thrown outside forward() kills the worker; readiness drops and queued requests wait for the replacement", async () => {
    const server = await startServer(LIFE, { env: { INIT_MS: "800" } });
    try {
      const crash = await post(`${server.url}/inference`, { n: 1, crash: "throw-outside", sleepMs: 200 });
      assert.equal(crash.status, 500, crash.text);
      assert.match(crash.json.error, /worker died/);
      await server.waitForLog((l) => l.msg === "worker died; replacing it");
      const notReady = await send(`${server.url}/readyz`);
      assert.equal(notReady.status, 503);
      // Sent while no worker lives: queued, then served by the replacement within the deadline.
      const queued = await Promise.all([1, 2, 3].map((n) => post(`${server.url}/inference`, { n })));
      assert.deepEqual(queued.map((r) => r.status), [200, 200, 200]);
      assert.equal((await send(`${server.url}/readyz`)).status, 200);
    } finally {
      await server.stop();
    }
  });
});
