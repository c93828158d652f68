/** Pipelines: a typed array travels from one stage to the next as a typed array. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { assertError, fixture, post, startServer, type ServerProcess } from "./helpers.js";

// Sum of k / 2 for k in 0..n-1.
const sumTo = (n: number) => (n * (n - 1)) / 4;

describe("two-stage pipelines", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("pipeline.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("the start-up log shows both stages on the route", () => {
    const listening = server.logs().find((l) => l.msg?.startsWith("listening on"));
    assert.deepEqual(listening?.routes, { "/embed": ["Embed_1", "Reduce_2"], "/embed-batch": ["EmbedBatch_3", "ReduceBatch_4"] });
  });

  test("stage 2 receives the Float32Array stage 1 returned", async () => {
    const reply = await post(`${server.url}/embed`, { n: 1000 });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { type: "Float32Array", length: 1000, sum: sumTo(1000), last: 999 / 2 });
  });

  test("a Float32Array that views a larger buffer arrives with only its own elements", async () => {
    const reply = await post(`${server.url}/embed`, { n: 10, view: true });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { type: "Float32Array", length: 10, sum: sumTo(10), last: 4.5 });
  });

  test("errors of either stage reach the client", async () => {
    assertError(await post(`${server.url}/embed`, { n: -1 }), 422, "request validation error: 'n' must be a whole number");
    assertError(await post(`${server.url}/embed`, { n: 0 }), 422, "request validation error: the embedding is empty");
    assertError(await post(`${server.url}/embed`, "n=1"), 400, /^decoding error: /);
  });

  test("an item that fails in stage 2 of a batched pipeline fails alone", async () => {
    const ns = [3, 0, 5, 7];
    const replies = await Promise.all(ns.map((n) => post(`${server.url}/embed-batch`, { n })));
    for (const [i, reply] of replies.entries()) {
      if (ns[i] === 0) {
        assertError(reply, 422, "request validation error: the embedding is empty");
        continue;
      }
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.sum, sumTo(ns[i]!));
    }
  });

  test("batched stages pass each item's array to the next stage, in order", async () => {
    const ns = Array.from({ length: 16 }, (_, i) => i + 1);
    const replies = await Promise.all(ns.map((n, i) => post(`${server.url}/embed-batch`, { n, view: i % 3 === 0 })));
    const sizes: number[] = [];
    for (const [i, reply] of replies.entries()) {
      const n = ns[i]!;
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.type, "Float32Array");
      assert.equal(reply.json.length, n);
      assert.equal(reply.json.sum, sumTo(n));
      assert.equal(reply.json.last, (n - 1) / 2);
      assert.ok(reply.json.batch >= 1 && reply.json.batch <= 4, reply.text);
      sizes.push(reply.json.batch);
    }
    assert.ok(
      sizes.some((s) => s > 1),
      `stage 2 got batches of more than one item: ${sizes}`,
    );
  });
});
