/**
 * What a Mosec server's answers are made of, without a server: the routes' dialect (bare errors,
 * Mosec's SSE error events, which errors open a stream) and Mosec's metric series in the one
 * registry (names, labels, buckets). test/mosec-service.test.ts runs them against Mosec's tests.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MOSEC_DIALECT } from "../src/apis/mosec/mosec.js";
import { ShoalError } from "../src/errors.js";
import { frameError } from "../src/http/stream-reply.js";
import { Metrics } from "../src/metrics/registry.js";

const GAUGES = { stages: () => [], pools: () => [], models: () => [], modelParts: () => [], inFlight: () => 3, bytesInFlight: () => 0 };

describe("a Mosec server's dialect", () => {
  test("an error is its text alone; in a stream, Mosec's event with the status and its reason", () => {
    const invalid = new ShoalError("VALIDATION", "text is required");
    assert.equal(MOSEC_DIALECT.errorText!(invalid, false), "request validation error: text is required");
    assert.equal(frameError("sse", invalid, MOSEC_DIALECT), "event: error\ndata: SSE inference error: 422: Unprocessable Content: request validation error: text is required\n\n");
    assert.equal(frameError("sse", new ShoalError("INTERNAL"), MOSEC_DIALECT), "event: error\ndata: SSE inference error: 500: Internal Server Error: inference internal error\n\n");
    assert.equal(frameError("sse", new ShoalError("FORWARD_TIMEOUT", "after 500 ms"), MOSEC_DIALECT), "event: error\ndata: SSE inference error: 408: Request Timeout: forward timeout: after 500 ms\n\n");
    // A message of several lines stays one event.
    assert.equal(frameError("sse", new ShoalError("BAD_REQUEST", "a\nb"), MOSEC_DIALECT), "event: error\ndata: SSE inference error: 400: Bad Request: bad request: a\ndata: b\n\n");
  });

  test("a stream opens to tell an error of a queued request; a full queue and a server not serving answer with their status", () => {
    for (const code of ["VALIDATION", "DECODING", "TIMEOUT", "INTERNAL"] as const) assert.equal(MOSEC_DIALECT.errorInStream!(new ShoalError(code)), true, code);
    for (const code of ["QUEUE_FULL", "SHUTTING_DOWN", "NOT_READY"] as const) assert.equal(MOSEC_DIALECT.errorInStream!(new ShoalError(code)), false, code);
  });
});

describe("Mosec's metric series", () => {
  test("only when asked for, beside Shoal's, with Mosec's names, labels and buckets", async () => {
    assert.doesNotMatch(await new Metrics("shoal", GAUGES).text(), /mosec/);
    const metrics = new Metrics("shoal", GAUGES, undefined, { namespace: "mosec_service", timeoutMs: 3000 });
    const stage = metrics.stage("Square_1");
    stage.batch(3, 1);
    stage.batch(1, 2);
    stage.forward(12, 1);
    metrics.answered("/inference", 200, 20);
    metrics.answered("/inference", 422, 5);
    metrics.answered("/inference", 200, 5000, "grpc");
    const text = await metrics.text();
    assert.match(text, /^shoal_stage_batch_size_bucket\{le="4",stage="Square_1"\} 2$/m);
    assert.match(text, /^mosec_service_batch_size_bucket\{le="2",stage="Square_1",connection="1"\} 0$/m);
    assert.match(text, /^mosec_service_batch_size_bucket\{le="4",stage="Square_1",connection="1"\} 1$/m);
    assert.match(text, /^mosec_service_batch_size_bucket\{le="1",stage="Square_1",connection="2"\} 1$/m);
    assert.match(text, /^mosec_service_batch_size_bucket\{le="512",stage="Square_1",connection="1"\} 1$/m);
    // Durations double from 1 ms until they pass the 3000 ms timeout: 1 ms to 4.096 s.
    const bounds = [...text.matchAll(/^mosec_service_process_duration_second_bucket\{le="([^"]+)",stage="total",connection="total"\}/gm)].map((m) => m[1]);
    assert.deepEqual(bounds, [...Array.from({ length: 13 }, (_, k) => String(0.001 * 2 ** k)), "+Inf"]);
    // Only the REST answer of 200 counts as a whole request's duration; every code counts in throughput.
    assert.match(text, /^mosec_service_process_duration_second_count\{stage="total",connection="total"\} 1$/m);
    assert.match(text, /^mosec_service_process_duration_second_count\{stage="Square_1",connection="1"\} 1$/m);
    assert.match(text, /^mosec_service_throughput_total\{code="200",endpoint="\/inference"\} 1$/m);
    assert.match(text, /^mosec_service_throughput_total\{code="422",endpoint="\/inference"\} 1$/m);
    assert.match(text, /^mosec_service_remaining_task 3$/m);
  });
});
