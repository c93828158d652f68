/**
 * Restarts per worker slot: a slot whose worker keeps failing backs off on its own while the
 * other slot serves, shows in /readyz and in a gauge, and --max-restarts turns /healthz to 503.
 */
import assert from "node:assert/strict";
import { writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { fixture, post, RecordFile, send, startServer, waitFor, waitForMetric, type LogLine, type ServerProcess } from "./helpers.js";

const STARTUP = fixture("startup.ts");

/** The pid of the worker `workerId` that became ready last, from the record file. */
function readyPid(rec: RecordFile, workerId: number): number | undefined {
  const pids = rec.lines().map((l) => l.split(" ")).filter(([e, id]) => e === "ready" && Number(id) === workerId);
  return pids.length === 0 ? undefined : Number(pids.at(-1)![2]);
}

const about = (workerId: number, msg: string) => (l: LogLine) => l.worker === workerId && l.msg === msg;

describe("restarts per worker slot", () => {
  let rec: RecordFile;
  let broken: string;
  let server: ServerProcess | undefined;
  beforeEach(() => {
    rec = new RecordFile();
    broken = join(rec.dir, "broken");
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    rec.remove();
  });

  test("one slot crash-looping backs off on its own while the other serves every request", async () => {
    server = await startServer(STARTUP, { env: { NUM: "2", RECORD_FILE: rec.path, BROKEN_FILE: broken } });
    const url = server.url;
    // Worker 2's model goes away, then its process is killed from outside.
    writeFileSync(`${broken}-2`, "");
    process.kill(readyPid(rec, 2)!, "SIGKILL");
    const died = await server.waitForLog(about(2, "worker died; replacing it"));
    assert.equal(died.restartInMs, 0, "a kill from outside is replaced at once");
    // Each failed start of worker 2 waits longer than the one before.
    await server.waitForLog((l) => about(2, "worker failed to start")(l) && (l.restartInMs as number) >= 800, 30_000);
    const starts = server.logs().filter(about(2, "worker failed to start")).map((l) => l.restartInMs);
    assert.deepEqual(starts.slice(0, 4), [100, 200, 400, 800], "the kill did not count as a failure");
    // Slot 2 in back-off: ready all the same, with the slot in /readyz and in the gauge.
    const degraded = await waitFor("readyz to show worker 2 backing off", async () => {
      const reply = await send(`${url}/readyz`);
      assert.equal(reply.status, 200, reply.text);
      return reply.json.degraded as string | undefined;
    }, 30_000);
    assert.match(degraded, /^Starting_1 worker 2 restarting in \d+ ms$/);
    await waitForMetric(url, "shoal_stage_workers_backing_off", { stage: "Starting_1" }, (v) => v === 1, 30_000);
    const replies = await Promise.all(Array.from({ length: 20 }, () => post(`${url}/inference`, {})));
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.worker, 1, "worker 1 answers");
    }
    assert.equal((await send(`${url}/healthz`)).status, 200, "healthy without --max-restarts");
    // Its model back, the slot serves again and its back-off is gone.
    rmSync(`${broken}-2`);
    await waitFor("worker 2 to be ready again", () => (rec.lines().filter((l) => l.startsWith("ready 2 ")).length === 2 ? true : undefined), 30_000);
    await waitForMetric(url, "shoal_stage_workers_backing_off", { stage: "Starting_1" }, (v) => v === 0);
    assert.deepEqual((await send(`${url}/readyz`)).json, { ready: true });
    assert.equal(server.exited, false);
  });

  test("--max-restarts: more restarts within --restart-window turn /healthz to 503; /readyz says which slot backs off", async () => {
    server = await startServer(STARTUP, { env: { RECORD_FILE: rec.path, BROKEN_FILE: broken }, args: ["--max-restarts", "3", "--restart-window", "60000"] });
    const url = server.url;
    assert.deepEqual((await send(`${url}/healthz`)).json, { live: true });
    writeFileSync(`${broken}-1`, "");
    process.kill(readyPid(rec, 1)!, "SIGKILL");
    const notReady = await waitFor("readyz to show worker 1 backing off", async () => {
      const reply = await send(`${url}/readyz`);
      return reply.status === 503 && /restarting in/.test(reply.json.reason) ? reply.json.reason as string : undefined;
    }, 30_000);
    assert.match(notReady, /^no live worker in Starting_1 \(worker 1 restarting in \d+ ms\)$/);
    const unhealthy = await waitFor("healthz to answer 503", async () => {
      const reply = await send(`${url}/healthz`);
      return reply.status === 503 ? reply.json : undefined;
    }, 30_000);
    assert.deepEqual(unhealthy, { live: false, reason: "4 worker restarts within 60000 ms (--max-restarts 3)" });
    assert.ok(server.logs().filter((l) => l.msg === "worker failed to start").length >= 3);
    assert.equal(server.exited, false, "the server leaves replacing itself to its orchestrator");
  });
});
