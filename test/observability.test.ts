/**
 * Latency by phase: a Worker of known forward time behind a queue of known batch wait, and the
 * histograms that say where each request's time went (queue, batch fill, forward, end to end,
 * between a stream's chunks) and which batch it went in.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fixture, post, sample, send, startServer, waitForMetric, type ServerProcess } from "./helpers.js";

// Bounds picked around the fixture's timings with wide margins: the fill wait is 100 ms, the
// forward 300 ms, a lone request's whole time about 400 ms.
const BUCKETS = "0.05,0.09,0.25,0.6,2";
const BATCH_BUCKETS = "1,2,4";
const SLOW = { route: "/slow", protocol: "http" };

/** A histogram's count in each of its buckets alone (not cumulative), by upper bound. */
function buckets(text: string, name: string, labels: Record<string, string>): Map<string, number> {
  const out = new Map<string, number>();
  let below = 0;
  for (const le of [...(name.endsWith("batch_size") ? BATCH_BUCKETS : BUCKETS).split(","), "+Inf"]) {
    const cumulative = sample(text, `${name}_bucket`, { ...labels, le }) ?? 0;
    out.set(le, cumulative - below);
    below = cumulative;
  }
  return out;
}

/** What one scrape holds of the histograms of a phase, by name. */
async function phases(url: string): Promise<(name: string, labels?: Record<string, string>) => Map<string, number>> {
  const text = (await send(`${url}/metrics`)).text;
  return (name, labels = SLOW) => buckets(text, name, labels);
}

/** The differences, bucket by bucket, of two readings of a histogram. */
function since(now: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [le, n] of now) if (n - (before.get(le) ?? 0) !== 0) out[le] = n - (before.get(le) ?? 0);
  return out;
}

describe("latency by phase", () => {
  let server: ServerProcess;

  before(async () => {
    server = await startServer(fixture("observability.ts"), { args: ["--latency-buckets", BUCKETS, "--batch-size-buckets", BATCH_BUCKETS] });
  });

  after(async () => {
    await server?.stop();
  });

  test("a lone request: its batch waits 100 ms to fill, its forward takes 300 ms, it went in a batch of 1", async () => {
    const reply = await post(`${server.url}/slow`, {});
    assert.equal(reply.status, 200);
    assert.deepEqual(reply.json, { batch: 1 });
    const read = await phases(server.url);
    assert.deepEqual(Object.fromEntries(read("shoal_request_batch_fill_seconds")), { "0.05": 0, "0.09": 0, "0.25": 1, "0.6": 0, "2": 0, "+Inf": 0 });
    assert.deepEqual(Object.fromEntries(read("shoal_request_queue_seconds")), { "0.05": 0, "0.09": 0, "0.25": 1, "0.6": 0, "2": 0, "+Inf": 0 });
    assert.deepEqual(Object.fromEntries(read("shoal_request_forward_seconds")), { "0.05": 0, "0.09": 0, "0.25": 0, "0.6": 1, "2": 0, "+Inf": 0 });
    assert.deepEqual(Object.fromEntries(read("shoal_request_duration_seconds")), { "0.05": 0, "0.09": 0, "0.25": 0, "0.6": 1, "2": 0, "+Inf": 0 });
    assert.equal(read("shoal_request_batch_size").get("1"), 1);
  });

  test("four at once share a batch of 4; one sent while they are at the worker waits for it, not for a batch to fill", async () => {
    const before = await phases(server.url);
    const four = Array.from({ length: 4 }, () => post(`${server.url}/slow`, {}));
    // The batch of four is at the worker: the fifth waits in the queue for the worker.
    await waitForMetric(server.url, "shoal_stage_batch_size_count", { stage: "Slow_1" }, (n) => n === 2);
    const fifth = post(`${server.url}/slow`, {});
    await waitForMetric(server.url, "shoal_queue_behind_seconds", { stage: "Slow_1" }, (s) => s >= 0.05);
    // What a gateway reads meanwhile: four running, one queued (the Inference Extension's gauges), and ORCA's load report.
    const scrape = (await send(`${server.url}/metrics`)).text;
    assert.equal(sample(scrape, "shoal_stage_running", { stage: "Slow_1" }), 4);
    assert.equal(sample(scrape, "shoal_stage_queue_depth", { stage: "Slow_1" }), 1);
    const json = await post(`${server.url}/now`, {}, { "endpoint-load-metrics-format": "JSON" });
    assert.equal(json.status, 200, json.text);
    const report = json.headers.get("endpoint-load-metrics")!;
    assert.match(report, /^JSON \{/);
    const named = (JSON.parse(report.slice(5)) as { named_metrics: Record<string, number> }).named_metrics;
    assert.deepEqual({ ...named, queue_behind_seconds: undefined }, { queued_requests: 1, running_requests: 4, in_flight_requests: 6, queue_behind_seconds: undefined });
    assert.ok(named.queue_behind_seconds! >= 0.05 && named.queue_behind_seconds! < 2, report);
    const text = (await post(`${server.url}/now`, {}, { "endpoint-load-metrics-format": "text" })).headers.get("endpoint-load-metrics")!;
    assert.match(text, /^TEXT named_metrics\.queued_requests=1, named_metrics\.running_requests=4, named_metrics\.in_flight_requests=6, named_metrics\.queue_behind_seconds=0\.\d+$/);
    // Asked for no report, or a form Shoal does not write (ORCA's binary one), an answer has none.
    assert.equal((await post(`${server.url}/now`, {})).headers.get("endpoint-load-metrics"), null);
    assert.equal((await post(`${server.url}/now`, {}, { "endpoint-load-metrics-format": "BIN" })).headers.get("endpoint-load-metrics"), null);
    const replies = await Promise.all([...four, fifth]);
    assert.deepEqual(replies.map((r) => r.status), [200, 200, 200, 200, 200]);
    assert.deepEqual(replies.map((r) => (r.json as { batch: number }).batch), [4, 4, 4, 4, 1]);
    const read = await phases(server.url);
    assert.deepEqual(since(read("shoal_request_batch_size"), before("shoal_request_batch_size", SLOW)), { "1": 1, "4": 4 });
    // The fifth was taken as soon as the worker was free (it had waited longer than 100 ms): no fill wait.
    const fill = since(read("shoal_request_batch_fill_seconds"), before("shoal_request_batch_fill_seconds", SLOW));
    assert.ok((fill["0.05"] ?? 0) + (fill["0.09"] ?? 0) + (fill["0.25"] ?? 0) === 5 && (fill["0.05"] ?? 0) >= 1, `fill waits ${JSON.stringify(fill)}`);
    // It waited most of a forward for the worker.
    const queue = since(read("shoal_request_queue_seconds"), before("shoal_request_queue_seconds", SLOW));
    assert.ok((queue["0.25"] ?? 0) + (queue["0.6"] ?? 0) >= 1, `queue waits ${JSON.stringify(queue)}`);
    assert.deepEqual(since(read("shoal_request_forward_seconds"), before("shoal_request_forward_seconds", SLOW)), { "0.6": 5 });
    assert.equal(await waitForMetric(server.url, "shoal_queue_behind_seconds", { stage: "Slow_1" }, (s) => s === 0), undefined);
  });

  test("without --dashboard there is no dashboard", async () => {
    assert.equal((await send(`${server.url}/dashboard`)).status, 404);
    assert.equal((await send(`${server.url}/dashboard/metrics.json`)).status, 404);
  });

  test("a stream: its first chunk at once, the two after it 100 ms apart", async () => {
    const reply = await send(`${server.url}/ticks`, { method: "POST", body: "{}", headers: { "content-type": "application/json", accept: "application/x-ndjson" } });
    assert.equal(reply.status, 200);
    assert.equal(reply.text.trim().split("\n").length, 3);
    const read = await phases(server.url);
    assert.deepEqual(Object.fromEntries(read("shoal_stream_chunk_interval_seconds", { route: "/ticks" })), { "0.05": 0, "0.09": 0, "0.25": 2, "0.6": 0, "2": 0, "+Inf": 0 });
    assert.equal(read("shoal_stream_first_chunk_seconds", { route: "/ticks" }).get("0.05"), 1);
  });
});
