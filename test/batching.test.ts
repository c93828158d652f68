/** Dynamic batching: batches form under load, each item keeps its own answer, errors stay per item (a batch that fails as a whole included). */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RecordFile, assertError, fixture, metric, post, startServer, type Reply, type ServerProcess } from "./helpers.js";

describe("batching", () => {
  let server: ServerProcess;
  const batches = new RecordFile();
  before(async () => {
    server = await startServer(fixture("batching.ts"), { env: { RECORD_FILE: batches.path } });
  });
  after(async () => {
    await server?.stop();
    batches.remove();
  });

  // Sends 8 concurrent requests to /group, a stage that waits up to 2 s to fill a batch of 8, so
  // that they travel as one batch. `body(i)` gives the body of request i.
  function group(body: (i: number) => unknown, route = "/group"): Promise<Reply[]> {
    return Promise.all(Array.from({ length: 8 }, (_, i) => post(`${server.url}${route}`, body(i), { "x-request-id": `group-${i}` })));
  }

  test("32 concurrent requests form batches (some > 1, none > 8) and each request gets its own answer", async () => {
    const n = 32;
    const replies = await Promise.all(Array.from({ length: n }, (_, i) => post(`${server.url}/double`, { i }, { "x-request-id": `double-${i}` })));
    const sizes: number[] = [];
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.i, i, "the answer belongs to this request");
      assert.equal(reply.json.y, 2 * i);
      assert.equal(reply.json.requestId, `double-${i}`, "forward() got this request's meta at this item's index");
      assert.equal(reply.headers.get("x-request-id"), `double-${i}`);
      sizes.push(reply.json.batch);
    }
    assert.ok(
      sizes.every((s) => Number.isInteger(s) && s >= 1 && s <= 8),
      `batch sizes within 1..8: ${sizes}`,
    );
    assert.ok(
      sizes.some((s) => s > 1),
      `some batches hold more than one item: ${sizes}`,
    );
    // What the worker saw: every request computed exactly once, in batches of at most 8.
    const seen = batches.lines().map((l) => Number(l.split(" ")[1]));
    assert.equal(
      seen.reduce((a, b) => a + b, 0),
      n,
      `forward() batch sizes: ${seen}`,
    );
    assert.ok(Math.max(...seen) <= 8, `forward() batch sizes: ${seen}`);
  });

  test("a lone request leaves after maxWaitMs, far below the deadline", async () => {
    const reply = await post(`${server.url}/lone`, { i: 0 });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { batch: 1 });
    assert.ok(reply.elapsedMs >= 280, `answered after ${reply.elapsedMs} ms, before maxWaitMs 300`);
    assert.ok(reply.elapsedMs < 2000, `answered after ${reply.elapsedMs} ms`);
  });

  test("an Error returned at one index fails only that item (422); the rest of the batch succeeds", async () => {
    const replies = await group((i) => ({ i, mode: i === 3 ? "invalid" : undefined }));
    for (const [i, reply] of replies.entries()) {
      if (i === 3) {
        assertError(reply, 422, "request validation error: item 3 is invalid");
        continue;
      }
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.i, i);
      assert.equal(reply.json.withInvalid, true, `item ${i} shared its batch with the invalid one: ${reply.text}`);
    }
  });

  test("an item that cannot be decoded fails alone (400); the others of its batch succeed", async () => {
    const replies = await group((i) => (i === 5 ? '{"i": 5,' : { i }));
    for (const [i, reply] of replies.entries()) {
      if (i === 5) {
        assertError(reply, 400, /^decoding error: /);
        continue;
      }
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.i, i);
      // Eight left together; forward() saw the seven that decoded.
      assert.equal(reply.json.batch, 7, reply.text);
    }
  });

  test("an exception from forward() fails only the item that causes it: the batch runs again in halves to find it", async () => {
    const retries = () => metric(server.url, "shoal_stage_batch_retry_runs_total", { stage: "Group_3" });
    const before = await retries();
    const replies = await group((i) => ({ i, mode: i === 6 ? "throw" : undefined }));
    for (const [i, reply] of replies.entries()) {
      if (i === 6) {
        assertError(reply, 500, "inference internal error");
        continue;
      }
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.i, i);
      // Answered by the run of the part that did not hold item 6: halves of 4, 2 and 1.
      assert.equal(reply.json.batch, i < 4 ? 4 : i < 6 ? 2 : 1, reply.text);
    }
    assert.equal((await retries())! - before!, 6);
    await server.waitForLog((l) => l.msg === "forward failed" && l.requestId === "group-6" && String(l.err).includes("the whole batch failed"));
  });

  test("a Worker that opts out (splitFailedBatches = false) fails every item of the batch with the exception's 500", async () => {
    const replies = await group((i) => ({ i, mode: i === 0 ? "throw" : undefined }), "/group-whole");
    for (const reply of replies) assertError(reply, 500, "inference internal error");
    assert.equal(await metric(server.url, "shoal_stage_batch_retry_runs_total", { stage: "GroupWhole_5" }), 0);
  });

  test("forward() returning the wrong number of results fails the batch with 500 and says so in the log", async () => {
    const replies = await group((i) => ({ i, mode: i === 7 ? "short" : undefined }));
    for (const reply of replies) assertError(reply, 500, "inference internal error");
    const line = await server.waitForLog((l) => String(l.err).includes("returned an array of 7 for a batch of 8"));
    assert.equal(line.msg, "forward failed");
  });

  test("the stage serves correctly after failed batches", async () => {
    const replies = await group((i) => ({ i }));
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.json, { i, batch: 8, withInvalid: false });
    }
  });

  test("a stage shared by two routes serves both from one pool, in mixed batches", async () => {
    const n = 16;
    const requests: Promise<Reply>[] = [];
    for (let i = 0; i < n; i++) {
      requests.push(post(`${server.url}/a`, { i }));
      requests.push(post(`${server.url}/b`, { i: n + i }));
    }
    const replies = await Promise.all(requests);
    let mixed = 0;
    for (const [k, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      const route = k % 2 === 0 ? "/a" : "/b";
      assert.equal(reply.json.route, route);
      assert.equal(reply.json.i, k % 2 === 0 ? k / 2 : n + (k - 1) / 2);
      assert.equal(reply.json.worker, 1, "one pool of one worker serves both routes");
      assert.ok(reply.json.routes.includes(route));
      if (reply.json.routes.length === 2) mixed++;
    }
    assert.ok(mixed > 0, "at least one batch held requests of both routes");
  });
});
