/**
 * The fuzz suite: tens of thousands of generated requests (test/fuzz/) against one server with
 * stages of every codec, a batching stage, a typed stage, a two-stage pipeline, streaming stages
 * (batched, and a StepWorker), the OpenAI routes and a model repository (ONNX and a module
 * runtime, with the generate extension), compressed bodies among them, then a tenth as many
 * gRPC calls to its V2 gRPC service. Seeded, so a failure names requests that can be sent
 * again (`npm run fuzz -- --seed S --only I`). FUZZ_COUNT and FUZZ_SEED change the run.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Outcome } from "./fuzz/client.js";
import { Random } from "./fuzz/random.js";
import { describeGrpcRun, runGrpcFuzz, type GrpcFuzzResult } from "./fuzz/grpc.js";
import { describeGrpcResourceRun, runGrpcResourceFuzz, type GrpcResourceResult } from "./fuzz/grpc-resources.js";
import { generate, type FuzzRequest } from "./fuzz/requests.js";
import { checkAfter, describeRun, FUZZ_TARGET, runFuzz, startFuzzServer, type FuzzResult, type FuzzServer } from "./fuzz/run.js";
import { judge } from "./fuzz/verdict.js";

const COUNT = Number(process.env.FUZZ_COUNT ?? 20_000);
const SEED = Number(process.env.FUZZ_SEED ?? 1);

describe("the fuzz's own parts", () => {
  test("the generator is deterministic: a seed and an index always make the same request", () => {
    const a = new Random(42);
    const b = new Random(42);
    const drawn = Array.from({ length: 5 }, () => a.uint32());
    assert.deepEqual(drawn, Array.from({ length: 5 }, () => b.uint32()));
    assert.equal(new Set(drawn).size, 5);
    for (const index of [0, 1, 777, 19_999]) assert.deepEqual(generate(7, index, FUZZ_TARGET), generate(7, index, FUZZ_TARGET));
    assert.notDeepEqual(generate(7, 1, FUZZ_TARGET), generate(8, 1, FUZZ_TARGET));
  });

  test("the verdict: documented 5xx pass, others and malformed error answers do not", () => {
    const outcome = (method: string, path: string, status: number | undefined, body: string, headers: Record<string, string> = { "content-type": "application/json", "x-request-id": "r" }): Outcome => {
      const request: FuzzRequest = { index: 0, kind: "test", method, path, headers: [], body: undefined, chunked: false, raw: undefined };
      return { request, status, headers, body: Buffer.from(body), error: status === undefined ? "ECONNRESET" : undefined, unsent: false, answers: status === undefined ? 0 : 1, reused: false, hungUp: false, ms: 1 };
    };
    const internal = '{"error":"inference internal error"}';
    assert.equal(judge(outcome("POST", "/fuzz/buggy", 500, internal), "node"), undefined);
    assert.equal(judge(outcome("POST", "/fuzz/json", 500, internal), "node"), "500 inference internal error");
    assert.equal(judge(outcome("POST", "/fuzz/buggy", 500, '{"error":"worker died: gone"}'), "node"), "500 worker died: gone");
    assert.equal(judge(outcome("GET", "/v2/models/mlp/ready", 503, '{"error":"service unavailable: loading"}'), "node"), undefined);
    assert.equal(judge(outcome("GET", "/readyz", 503, '{"ready":false,"reason":"loading"}'), "node"), undefined);
    assert.equal(judge(outcome("GET", "/x", 502, "{}"), "node"), "status 502, which is not in the error table");
    assert.equal(judge(outcome("GET", "/x", 400, '{"error":1}'), "node"), '400 whose body is not {"error": "..."}');
    assert.equal(judge(outcome("GET", "/x", 400, "", {}), "node"), "400 without an x-request-id");
    assert.equal(judge(outcome("GET", "/x", undefined, ""), "node"), "no answer: ECONNRESET");
    assert.equal(judge({ ...outcome("POST", "/fuzz/stream", undefined, ""), hungUp: true }, "node"), undefined);
    const stream = (type: string, body: string) => outcome("POST", "/fuzz/stream", 200, body, { "content-type": type, "x-request-id": "r" });
    assert.equal(judge(stream("text/event-stream", 'data: {"i":0}\n\n: keep-alive\n\ndata: a\ndata: b\n\n'), "node"), undefined);
    assert.equal(judge(stream("text/event-stream", 'data: {"i":0}\n\nevent: error\ndata: {"error":"request timeout: the stream did not end within 9 ms"}\n\n'), "node"), undefined);
    assert.equal(judge(stream("text/event-stream", 'data: {"i":0}\n\nevent: error\ndata: {"error":"worker died: x"}\n\n'), "node"), 'a stream that failed: {"error":"worker died: x"}');
    assert.equal(judge(stream("text/event-stream", 'data: {"i":0}\n'), "node"), "an SSE body that does not end with a blank line");
    assert.equal(judge(stream("text/event-stream", 'data: {"i":0}\nxx\n\n'), "node"), "an SSE body with a malformed event");
    assert.equal(judge({ ...stream("text/event-stream", 'data: {"i"'), hungUp: true }, "node"), undefined);
    assert.equal(judge(stream("application/x-ndjson", '{"i":0}\n{"i":1}\n'), "node"), undefined);
    assert.equal(judge(stream("application/x-ndjson", '{"i":0}\n{"i"\n'), "node"), "an NDJSON line that is not JSON");
    assert.equal(judge(stream("application/x-ndjson", '{"i":0}\n{"error":"stream backlog full: x"}\n'), "node"), 'a stream that failed: {"error":"stream backlog full: x"}');
    // On Bun, what Bun.serve's parser refuses is answered bare, or not at all on a raw request.
    const bare = outcome("GET", "/x", 400, "", {});
    assert.equal(judge(bare, "bun"), undefined);
    assert.equal(judge({ ...bare, status: 431 }, "bun"), undefined);
    assert.equal(judge({ ...bare, status: 502 }, "bun"), "status 502, which is not in the error table");
    assert.equal(judge(outcome("GET", "/x", 400, '{"error":1}', {}), "bun"), "400 without an x-request-id");
    assert.equal(judge(outcome("GET", "/x", undefined, ""), "bun"), "no answer: ECONNRESET");
    // A body refused at once (far past its route's limit) is answered, then cut off past the
    // bounds of what is read and dropped, on any runtime: its client may lose the answer.
    const refused = { ...outcome("POST", "/v1/completions", undefined, ""), error: "EPIPE" };
    refused.request.body = new Uint8Array(2 * 1024 * 1024);
    assert.equal(judge(refused, "bun"), undefined);
    assert.equal(judge(refused, "node"), undefined);
    // So is one over its limit whose client was still sending 2 s on.
    const slow = { ...refused, ms: 2500, request: { ...refused.request, path: "/fuzz/json", body: new Uint8Array(10 * 1024 * 1024 + 1) } };
    assert.equal(judge(slow, "node"), undefined);
    assert.equal(judge({ ...slow, ms: 300 }, "node"), "no answer: EPIPE");
    // Within those bounds, it must be answered.
    assert.equal(judge({ ...refused, request: { ...refused.request, path: "/fuzz/json" } }, "bun"), "no answer: EPIPE");
    assert.equal(judge({ ...refused, request: { ...refused.request, path: "/fuzz/json" } }, "node"), "no answer: EPIPE");
    // A misfit's failures are its own by design; the same answer for any other model is a finding.
    const forModel = (o: Outcome, model: string): Outcome => ({ ...o, request: { ...o.request, body: Buffer.from(JSON.stringify({ model, prompt: "x" })) } });
    const misfit = outcome("POST", "/v1/completions", 500, JSON.stringify({ error: { message: "encoding error: the Worker's answer does not fit this API: x", type: "server_error", param: null, code: "encoding" } }));
    assert.equal(judge(forModel(misfit, "fuzz-misfit-once"), "node"), undefined);
    assert.equal(judge(forModel(misfit, "fuzz-echo"), "node"), "500 encoding error: the Worker's answer does not fit this API: x");
    const misfitStream = outcome("POST", "/v2/models/misfit/generate_stream", 200, 'data: {"a":1}\n\nevent: error\ndata: {"error":"bad request: output \'text_output\': BYTES element 0 is not valid UTF-8"}\n\n', { "content-type": "text/event-stream", "x-request-id": "r" });
    assert.equal(judge(misfitStream, "node"), undefined);
    assert.match(judge({ ...misfitStream, request: { ...misfitStream.request, path: "/v2/models/upper/generate_stream" } }, "node") ?? "", /^a stream that failed/);
    assert.equal(judge({ ...outcome("POST", "/v2/models/mlp/generate", 400, '{"error":"bad request: x"}'), answers: 2 }, "node"), "2 answers to one request");
  });
});

describe(`fuzz: ${COUNT} generated requests, seed ${SEED}`, () => {
  let server: FuzzServer;
  let result: FuzzResult;
  let grpcResult: GrpcFuzzResult;
  let resources: GrpcResourceResult;
  let afterwards: string[];

  before(async () => {
    server = await startFuzzServer();
    result = await runFuzz({ port: server.server.port, seed: SEED, count: COUNT, concurrency: 24, timeoutMs: 15_000 });
    grpcResult = await runGrpcFuzz(server.grpcPort, SEED, Math.ceil(COUNT / 10), 24, FUZZ_TARGET.adminToken);
    afterwards = await checkAfter(server);
    // After the check, which loads again the models the run may have unloaded.
    resources = await runGrpcResourceFuzz(server.grpcPort, server.server.url, server.pid, SEED);
    process.stdout.write([...describeRun(SEED, result), ...describeGrpcRun(SEED, grpcResult), ...describeGrpcResourceRun(SEED, resources)].map((line) => `${line}\n`).join(""));
  });
  after(() => server?.stop());

  // The failures whose text starts with `what`, as the run printed them.
  const failures = (what: RegExp) => {
    const lines: string[] = [];
    for (const f of result.findings.list().filter((f) => what.test(f.problem))) lines.push(`${f.problem} (${f.count}x), e.g. request #${f.examples[0]!.request.index}`);
    return lines;
  };

  test("every request gets exactly one HTTP answer: no reset, no hang, no second answer", () => {
    assert.equal(result.tally.count, COUNT);
    assert.deepEqual(failures(/^no answer|answers to one request/), []);
  });

  test("no 5xx but the documented ones (503; 500 from the Worker that throws by design)", () => {
    assert.deepEqual(failures(/^5\d\d /), []);
  });

  test("every answer has a status of the error table, an x-request-id, and errors are {\"error\": ...} JSON", () => {
    assert.deepEqual(failures(/^(?!no answer|5\d\d |\d+ answers to one request)/), []);
  });

  test("every gRPC call ends with a status the error table maps to (or grpc-js's own for what it cannot inflate)", () => {
    assert.equal(grpcResult.count, Math.ceil(COUNT / 10));
    assert.deepEqual([...grpcResult.failures].map(([problem, examples]) => `${problem}, e.g. call #${examples[0]!.call.index}`), []);
  });

  test("gRPC floods (idle connections, header-only calls, non-reading streams, health watch names, large repeated fields) leave a good call answered and nothing held", () => {
    assert.deepEqual(resources.problems, []);
  });

  test("afterwards the server is the same process, ready, with nothing in flight, and every route answers", () => {
    assert.deepEqual(afterwards, []);
  });
});
