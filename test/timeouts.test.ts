/** Deadlines, forward timeouts and clients that hang up. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RecordFile, assertError, fixture, post, rawRequest, sleep, startServer, waitFor, waitForMetric, type ServerProcess } from "./helpers.js";

describe("the request deadline (--timeout 500)", () => {
  let server: ServerProcess;
  const calls = new RecordFile();
  before(async () => {
    server = await startServer(fixture("timeouts.ts"), { args: ["--timeout", "500"], env: { RECORD_FILE: calls.path } });
  });
  after(async () => {
    await server?.stop();
    calls.remove();
  });

  test("a forward() that sleeps 2000 ms is answered 408 well before it would finish; the stage recovers", async () => {
    const reply = await post(`${server.url}/sleep`, { sleep: 2000 });
    assertError(reply, 408, /^(request|forward) timeout: /);
    assert.ok(reply.elapsedMs >= 450, `answered after ${reply.elapsedMs} ms, before the deadline`);
    assert.ok(reply.elapsedMs < 1500, `answered after ${reply.elapsedMs} ms`);
    // The worker also overran its forward timeout (by default the deadline) and is replaced;
    // quick requests succeed once the new one is up.
    let ok = false;
    for (let attempt = 0; attempt < 40 && !ok; attempt++) {
      const next = await post(`${server.url}/sleep`, {});
      ok = next.status === 200;
      if (!ok) await sleep(250);
    }
    assert.ok(ok, `the stage answers again after the timeout\n${server.describe()}`);
  });

  test("requests whose deadline passes while queued are answered 408 and never reach forward()", async () => {
    // The stage's forward timeout (5 s) outlasts the deadline: the worker stays busy with the
    // first request for 1200 ms while the others wait in the queue past their deadline.
    const first = post(`${server.url}/patient`, { sleep: 1200 }, { "x-request-id": "late-first" });
    await waitFor("the first request to reach forward()", () => (calls.lines().includes("late-first") ? true : undefined));
    const queued = await Promise.all([1, 2, 3].map((k) => post(`${server.url}/patient`, {}, { "x-request-id": `late-queued-${k}` })));
    for (const reply of [await first, ...queued]) {
      assertError(reply, 408, "request timeout: no answer within 500 ms");
      assert.ok(reply.elapsedMs < 1100, `answered after ${reply.elapsedMs} ms`);
    }
    // Once the first forward() has finished, the stage serves the next request.
    await waitForMetric(server.url, "shoal_stage_forward_duration_seconds_count", { stage: "Patient_3" }, (n) => n >= 1);
    const next = await post(`${server.url}/patient`, {}, { "x-request-id": "late-next" });
    assert.equal(next.status, 200, next.text);
    const seen = calls.lines().filter((l) => l.startsWith("late-"));
    assert.deepEqual(seen, ["late-first", "late-next"], "the queued requests were never computed");
  });
});

describe("forward timeouts and disconnected clients (--timeout 8000)", () => {
  let server: ServerProcess;
  const calls = new RecordFile();
  before(async () => {
    server = await startServer(fixture("timeouts.ts"), { args: ["--timeout", "8000", "--capacity", "3"], env: { RECORD_FILE: calls.path } });
  });
  after(async () => {
    await server?.stop();
    calls.remove();
  });

  for (const how of ["sleep", "busy"] as const) {
    test(`a stage's timeoutMs overrun (${how === "sleep" ? "async" : "synchronous busy loop"}) is a 408 and the worker is replaced`, async () => {
      const before = await post(`${server.url}/guarded`, {});
      assert.equal(before.status, 200, before.text);
      const overrun = await post(`${server.url}/guarded`, { [how]: 3000 }, { "x-request-id": `overrun-${how}` });
      assertError(overrun, 408, "forward timeout: forward() did not finish within 300 ms");
      assert.ok(overrun.elapsedMs < 2500, `answered after ${overrun.elapsedMs} ms`);
      const after = await post(`${server.url}/guarded`, {});
      assert.equal(after.status, 200, after.text);
      assert.notEqual(after.json.instance, before.json.instance, "a new worker instance answers");
      await server.waitForLog((l) => l.msg === "forward() overran its timeout; replacing the worker" && l.stage === "Guarded_2");
    });
  }

  test("a client that hangs up while queued has its item dropped, never computed", async () => {
    // One worker, no batching: the first request occupies it while the others queue.
    const busy = post(`${server.url}/sleep`, { sleep: 2500 }, { "x-request-id": "q-occupy" });
    await waitFor("the first request to reach forward()", () => (calls.lines().includes("q-occupy") ? true : undefined));
    const gone = [1, 2, 3].map((k) =>
      rawRequest(server.port, "/sleep", { headers: { "content-type": "application/json", "x-request-id": `q-gone-${k}` }, body: "{}" }),
    );
    // With --capacity 3 the queue is now full, which shows that those three were accepted and
    // queued: a probe is refused.
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Sleeper_1" }, (n) => n === 3);
    const probe = await post(`${server.url}/sleep`, {}, { "x-request-id": "q-probe" });
    assertError(probe, 429, "too many requests: the queue of stage Sleeper_1 is full");
    for (const { req } of gone) req.destroy();
    // Their slots free up as the server notices the hang-ups.
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Sleeper_1" }, (n) => n === 0);
    const marker = await post(`${server.url}/sleep`, {}, { "x-request-id": "q-marker" });
    assert.equal(marker.status, 200, marker.text);
    assert.equal((await busy).status, 200);
    const seen = calls.lines().filter((l) => l.startsWith("q-"));
    assert.deepEqual(seen, ["q-occupy", "q-marker"], "forward() saw neither the dropped items nor the refused probe");
  });
});
