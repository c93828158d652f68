/**
 * The scheduling rules past priorities on a real server: admission by predicted latency answers
 * 429 with Retry-After at once, before the deadline it would miss, and shows its prediction and
 * the real figure; two tenants of weights 3:1 share a saturated worker 3:1; a response cache
 * answers a repeated request without computing it, on a route and on a model; with length
 * buckets every batch holds items of one bucket; with `maxWaitMs: "auto"` the batches of
 * clients that send again when answered hold them all.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RecordFile, fixture, metric, post, startServer, waitFor, type Reply, type ServerProcess } from "./helpers.js";

describe("scheduling: admission by predicted latency, fair sharing, the response cache, length buckets", () => {
  let server: ServerProcess;
  const calls = new RecordFile();
  before(async () => {
    server = await startServer(fixture("scheduling.ts"), { args: ["--tenant-key", "header:x-tenant", "--timeout", "20000"], env: { RECORD_FILE: calls.path } });
  });
  after(async () => {
    await server?.stop();
    calls.remove();
  });

  test("a request the prediction says would miss its deadline gets 429 with Retry-After at once, and is never computed", async () => {
    const url = `${server.url}/predicted`;
    // The queue learns 100 ms a batch.
    for (let i = 0; i < 6; i++) assert.equal((await post(url, {}, { "x-request-id": `warm${i}` })).status, 200);
    // 60 sent: with 16 or more queued, 5 rounds of 100 ms at least; a request with 300 ms to live cannot make it (the others have 20 s).
    const queued = Array.from({ length: 60 }, (_, i) => post(url, {}, { "x-request-id": `q${i}` }));
    await waitFor("the queue to fill", async () => ((await metric(server.url, "shoal_stage_queue_depth", { stage: "Predicted_1" })) ?? 0) >= 16 || undefined);
    const late = await post(url, {}, { "x-request-id": "late", "x-shoal-timeout-ms": "300" });
    assert.equal(late.status, 429, late.text);
    assert.match(late.text, /stage Predicted_1 would answer in about \d+ ms, after the request's deadline/);
    assert.ok(Number(late.headers.get("retry-after")) >= 1, `Retry-After: ${late.headers.get("retry-after")}`);
    assert.ok(late.elapsedMs < 300, `answered after ${late.elapsedMs} ms: at once, not at its deadline`);
    const answers: Reply[] = await Promise.all(queued);
    assert.deepEqual(answers.map((r) => r.status), answers.map(() => 200), "those with time enough were all admitted and answered");
    assert.ok(!calls.lines().includes("late"), "the refused request was never computed");
    assert.equal(await metric(server.url, "shoal_queue_outcomes_total", { stage: "Predicted_1", level: "0", outcome: "shed" }), 1);
    const predicted = await metric(server.url, "shoal_stage_predicted_seconds_count", { stage: "Predicted_1" });
    const actual = await metric(server.url, "shoal_stage_predicted_actual_seconds_count", { stage: "Predicted_1" });
    assert.ok(predicted !== undefined && predicted >= 60 && predicted === actual, `predictions ${predicted}, real figures ${actual}`);
  });

  test("two tenants of weights 3:1 share a saturated worker 3:1 within 10 %, and are counted", async () => {
    const url = `${server.url}/shared`;
    const before = calls.lines().length;
    const sends = [];
    for (let i = 0; i < 60; i++) {
      sends.push(post(url, {}, { "x-tenant": "a" }));
      sends.push(post(url, {}, { "x-tenant": "b" }));
    }
    const answers = await Promise.all(sends);
    assert.deepEqual(answers.map((r) => r.status), answers.map(() => 200));
    const order = calls.lines().slice(before).map((line) => line.slice("tenant:".length));
    assert.equal(order.length, 120);
    // While both had requests waiting: the first 60 computed after the first few (which came before the queue filled).
    const saturated = order.slice(10, 70);
    const a = saturated.filter((t) => t === "a").length;
    const b = saturated.filter((t) => t === "b").length;
    assert.ok(Math.abs(a / b - 3) <= 0.3, `a ${a}, b ${b}: ${(a / b).toFixed(2)} : 1`);
    assert.equal(await metric(server.url, "shoal_tenant_requests_total", { stage: "Shared_2", tenant: "a", outcome: "served" }), 60);
    assert.equal(await metric(server.url, "shoal_tenant_requests_total", { stage: "Shared_2", tenant: "b", outcome: "queued" }), 60);
  });

  test("with length buckets every batch holds items of one bucket, and every request is answered", async () => {
    const url = `${server.url}/bucketed`;
    // Texts of 10, 100 and 400 characters (bodies of 18, 108 and 408 bytes: buckets ≤ 40, ≤ 200 and the rest), mixed.
    const lengths = Array.from({ length: 48 }, (_, i) => [10, 100, 400][(i * 7) % 3]!);
    const answers = await Promise.all(lengths.map((n) => post(url, { t: "x".repeat(n) })));
    assert.deepEqual(answers.map((r) => r.status), answers.map(() => 200));
    assert.deepEqual(answers.map((r) => JSON.parse(r.text).length), lengths, "each its own answer");
    const batches = calls.lines().filter((line) => line.startsWith("bucket:")).map((line) => line.slice("bucket:".length).split(",").map(Number));
    assert.equal(batches.flat().length, 48, "every item computed once");
    for (const batch of batches) assert.equal(new Set(batch).size, 1, `a batch of one bucket: ${batch.join(",")}`);
    assert.ok(batches.some((batch) => batch.length > 1), `batches: ${batches.map((b) => b.length).join(" ")}`);
  });

  test('with maxWaitMs "auto" the batches of 6 clients that send again when answered hold them all, and the wait chosen is shown', async () => {
    const url = `${server.url}/adaptive`;
    const before = calls.lines().length;
    const statuses = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const seen: number[] = [];
        for (let i = 0; i < 12; i++) seen.push((await post(url, {})).status);
        return seen;
      }),
    );
    assert.deepEqual(statuses.flat(), Array(72).fill(200), "every request answered");
    const sizes = calls.lines().slice(before).filter((line) => line.startsWith("adaptive:")).map((line) => Number(line.slice("adaptive:".length)));
    assert.equal(sizes.reduce((a, b) => a + b, 0), 72);
    // After the 4 batches the latency model needs (and one to learn the clients' round trip), a
    // wait of 0 would leave them split (1 and 5, or 2 and 4: 3 a batch); auto waits the 30 ms
    // fixed part at most for the clients on their way.
    const late = sizes.slice(6);
    const mean = late.reduce((a, b) => a + b, 0) / late.length;
    assert.ok(mean >= 4.5, `batches ${sizes}: ${mean.toFixed(1)} a batch`);
    const chosen = await metric(server.url, "shoal_stage_batch_wait_seconds", { stage: "Adaptive_5" });
    assert.ok(chosen !== undefined && chosen >= 0 && chosen <= 0.062, `wait chosen ${chosen} s`);
  });

  test("a repeated request is answered from the cache and never computed; no-cache and another body are", async () => {
    const url = `${server.url}/cached`;
    const computed = () => calls.lines().filter((line) => line.startsWith("cached:"));
    const first = await post(url, { q: 1 });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("x-shoal-cache"), null);
    const again = await post(url, { q: 1 });
    assert.equal(again.status, 200);
    assert.equal(again.headers.get("x-shoal-cache"), "hit");
    assert.deepEqual(JSON.parse(again.text).echo, { q: 1 });
    assert.equal((await post(url, { q: 2 })).headers.get("x-shoal-cache"), null);
    assert.equal((await post(url, { q: 1 }, { "cache-control": "no-cache" })).headers.get("x-shoal-cache"), null);
    assert.deepEqual(computed(), ['cached:{"q":1}', 'cached:{"q":2}', 'cached:{"q":1}']);
    assert.equal(await metric(server.url, "shoal_cache_requests_total", { route: "/cached", result: "hit" }), 1);
    assert.equal(await metric(server.url, "shoal_cache_requests_total", { route: "/cached", result: "miss" }), 2);
    assert.equal(await metric(server.url, "shoal_cache_requests_total", { route: "/cached", result: "skip" }), 1);
  });

  test("the same on a model of the shared pool: its parameters are part of the key", async () => {
    const url = `${server.url}/v2/models/cached/infer`;
    const body = (tag: string) => ({ inputs: [{ name: "x", datatype: "INT32", shape: [2], data: [1, 2] }], parameters: { tag } });
    const answers = [];
    for (const tag of ["c-one", "c-one", "c-two", "c-one"]) answers.push(await post(url, body(tag)));
    assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 200]);
    assert.deepEqual(answers.map((r) => r.headers.get("x-shoal-cache")), [null, "hit", null, "hit"]);
    assert.deepEqual(JSON.parse(answers[1]!.text).outputs, JSON.parse(answers[0]!.text).outputs);
    assert.deepEqual(calls.lines().filter((line) => line.startsWith("c-")), ["c-one", "c-two"]);
  });
});
