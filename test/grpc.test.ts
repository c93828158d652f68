/**
 * The V2 gRPC service, driven by a Node client made with @grpc/grpc-js from the package's own
 * .proto files: every call, tensors raw and typed, each status of the error table, deadlines,
 * cancellation, streams, health checking, reflection, compression, batches that mix REST and
 * gRPC requests, and drain on SIGTERM.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { metric, post, RUNTIME, send, waitFor, waitForMetric, type ServerProcess } from "./helpers.js";
import { gunzipSync } from "node:zlib";
import { definition, fp32, freePort, rawCall, readFp32, V2Client, type RawAnswer } from "./grpc-helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { CALL_SHARE } from "../src/grpc/call-arrival.js";

const TOKEN = "grpc-test-token";
const ROOT = join(import.meta.dirname, "..");

describe("the V2 gRPC service", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let client: V2Client;
  let port: number;

  before(async () => {
    repo.module("echo", "echo.ts", { maxBatchSize: 16, maxWaitMs: 2 });
    // Batches wait long to fill, so that requests sent together share one.
    repo.module("mixed", "echo.ts", { maxBatchSize: 16, maxWaitMs: 1500 });
    // One request at a time: a second one waits in the queue.
    repo.module("slow", "echo.ts", { maxBatchSize: 1 });
    repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
    port = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(port), "--workers", "2", "--model-control", "explicit", "--max-request-size", "200000"], { SHOAL_ADMIN_TOKEN: TOKEN });
    client = new V2Client(port);
  });
  after(async () => {
    client?.close();
    await server?.stop();
    repo.remove();
  });

  test("health, server and model metadata, configuration", async () => {
    assert.deepEqual(await client.call("ServerLive", {}), { live: true });
    assert.deepEqual(await client.call("ServerReady", {}), { ready: true });
    assert.deepEqual(await client.call("ModelReady", { name: "echo" }), { ready: true });
    const metadata = await client.call("ServerMetadata", {});
    assert.equal(metadata.name, "shoal");
    assert.deepEqual(metadata.extensions, ["binary_tensor_data", "model_repository", "model_configuration", "statistics"]);
    const model = await client.call("ModelMetadata", { name: "scale" });
    assert.equal(model.name, "scale");
    assert.equal(model.platform, "shoal");
    const config = (await client.call("ModelConfig", { name: "mixed" })).config;
    assert.equal(config.name, "mixed");
    assert.equal(config.dynamic_batching.max_queue_delay_microseconds, "1500000");
    assert.deepEqual(config.dynamic_batching.preferred_batch_size, [16]);
  });

  test("advertises HTTP/2 windows that fit the largest request, so a large tensor is not held back by flow control", async () => {
    const { connect } = await import("node:http2");
    const session = connect(`http://127.0.0.1:${port}`);
    try {
      const settings = await new Promise<{ initialWindowSize?: number }>((resolve, reject) => {
        session.once("error", reject);
        // The first SETTINGS frame is the default one; the widened window follows it at once.
        session.on("remoteSettings", (remote) => {
          if ((remote.initialWindowSize ?? 0) > 65_535) resolve(remote);
        });
        setTimeout(() => resolve(session.remoteSettings), 5000);
      });
      assert.equal(settings.initialWindowSize, 200_000 + 5, "--max-request-size and the gRPC frame's 5-byte prefix");
    } finally {
      session.close();
    }
  });

  test("infers with raw contents: ids, parameters and requested outputs", async () => {
    const response = await client.call("ModelInfer", {
      model_name: "echo",
      id: "req-1",
      parameters: { note: { string_param: "x" } },
      inputs: [
        { name: "x", datatype: "FP32", shape: [2, 2] },
        { name: "s", datatype: "BYTES", shape: [2] },
      ],
      outputs: [{ name: "x_out" }, { name: "s_out" }],
      raw_input_contents: [fp32([1, 2.5, -3, 4]), Buffer.from([2, 0, 0, 0, 104, 105, 0, 0, 0, 0])],
    });
    assert.equal(response.model_name, "echo");
    assert.equal(response.id, "req-1");
    assert.deepEqual(response.outputs.map((o: any) => [o.name, o.datatype, o.shape]), [["x_out", "FP32", ["2", "2"]], ["s_out", "BYTES", ["2"]]]);
    assert.deepEqual(readFp32(response.raw_output_contents[0]), [1, 2.5, -3, 4]);
    assert.deepEqual([...response.raw_output_contents[1]], [2, 0, 0, 0, 104, 105, 0, 0, 0, 0]);
  });

  test("a request of several large raw tensors reaches the model exactly (its message's buffer moved to the worker)", async () => {
    const f64 = Float64Array.from({ length: 5000 }, (_, i) => i / 7);
    const f32 = Float32Array.from({ length: 4999 }, (_, i) => -i / 3);
    const text = Buffer.from([3, 0, 0, 0, 97, 98, 99]);
    const response = await client.call("ModelInfer", {
      model_name: "echo",
      inputs: [
        { name: "a", datatype: "FP64", shape: [5000] },
        { name: "b", datatype: "INT8", shape: [3] },
        { name: "c", datatype: "FP32", shape: [4999] },
        { name: "s", datatype: "BYTES", shape: [1] },
      ],
      outputs: [{ name: "a_out" }, { name: "b_out" }, { name: "c_out" }, { name: "s_out" }],
      raw_input_contents: [Buffer.from(f64.buffer), Buffer.from([255, 2, 253]), Buffer.from(f32.buffer), text],
    });
    const [a, b, c, s] = response.raw_output_contents as Buffer[];
    assert.deepEqual(new Float64Array(Uint8Array.from(a!).buffer), f64);
    assert.deepEqual([...b!], [255, 2, 253]);
    assert.deepEqual(new Float32Array(Uint8Array.from(c!).buffer), f32);
    assert.deepEqual([...s!], [...text]);
  });

  test("infers with typed contents of every kind", async () => {
    const inputs = [
      { name: "b", datatype: "BOOL", shape: [3], contents: { bool_contents: [true, false, true] } },
      { name: "i8", datatype: "INT8", shape: [2], contents: { int_contents: [-128, 127] } },
      { name: "i64", datatype: "INT64", shape: [2], contents: { int64_contents: ["-9007199254740993", "5"] } },
      { name: "u32", datatype: "UINT32", shape: [1], contents: { uint_contents: [4294967295] } },
      { name: "u64", datatype: "UINT64", shape: [1], contents: { uint64_contents: ["18446744073709551615"] } },
      { name: "f64", datatype: "FP64", shape: [1], contents: { fp64_contents: [0.1] } },
      { name: "t", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("hé")] } },
    ];
    const response = await client.call("ModelInfer", { model_name: "echo", inputs });
    const raw = (name: string) => response.raw_output_contents[response.outputs.findIndex((o: any) => o.name === `${name}_out`)] as Buffer;
    assert.deepEqual([...raw("b")], [1, 0, 1]);
    assert.deepEqual([...new Int8Array(raw("i8").buffer, raw("i8").byteOffset, 2)], [-128, 127]);
    assert.equal(raw("i64").readBigInt64LE(0), -9007199254740993n);
    assert.equal(raw("u32").readUInt32LE(0), 4294967295);
    assert.equal(raw("u64").readBigUInt64LE(0), 18446744073709551615n);
    assert.equal(raw("f64").readDoubleLE(0), 0.1);
    assert.equal(raw("t").subarray(4).toString(), "hé");
  });

  test("each failure has the status of its row of the error table", async () => {
    const infer = (request: object, options = {}) => client.error("ModelInfer", { model_name: "echo", ...request }, options);
    let e = await infer({ inputs: [{ name: "x", datatype: "FP32", shape: [3] }], raw_input_contents: [fp32([1])] });
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.match(e.details, /^bad request: input 'x'/);
    e = await infer({ inputs: [{ name: "x", datatype: "FP32", shape: [1], contents: { int_contents: [1] } }] });
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.match(e.details, /its elements go in fp32_contents, not int_contents/);
    e = await infer({ inputs: [{ name: "x", datatype: "INT8", shape: [1], contents: { int_contents: [300] } }] });
    assert.match(e.details, /out of the range of INT8/);
    e = await infer({ inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([1]), fp32([2])] });
    assert.match(e.details, /raw_input_contents holds 2 tensors for 1 inputs/);
    e = await infer({ inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([1])], parameters: { fail: { string_param: "no thanks" } } });
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(e.details, "bad request: no thanks");
    // A message that is not protobuf at all.
    const raw = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.client.makeUnaryRequest("/inference.GRPCInferenceService/ModelInfer", (b: Buffer) => b, (b: Buffer) => b, Buffer.from([0xff, 0xff, 0xff]), (err: grpc.ServiceError | null) => resolve(err)),
    );
    assert.equal(raw?.code, grpc.status.INVALID_ARGUMENT);
    assert.match(raw!.details, /^bad request: the message is not a valid ModelInferRequest: /);
    e = await client.error("ModelInfer", { model_name: "nope" });
    assert.equal(e.code, grpc.status.NOT_FOUND);
    assert.equal(e.details, "not found: model 'nope'");
    e = await client.error("ModelMetadata", { name: "echo", version: "7" });
    assert.equal(e.code, grpc.status.NOT_FOUND);
    // Larger than --max-request-size.
    e = await infer({ inputs: [{ name: "x", datatype: "FP32", shape: [60000] }], raw_input_contents: [fp32(new Array(60000).fill(1))] });
    assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
    e = await client.error("RepositoryModelUnload", { model_name: "echo" });
    assert.equal(e.code, grpc.status.UNAUTHENTICATED);
    e = await client.error("RepositoryModelUnload", { model_name: "echo" }, { metadata: { authorization: "Bearer wrong" } });
    assert.equal(e.code, grpc.status.UNAUTHENTICATED);
    assert.match(e.details, /the admin token is not right/);
    // The model's worker dies under the request: the server's failure.
    e = await client.error("ModelInfer", { model_name: "scale", parameters: { crash: { bool_param: true } }, inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([1])] });
    assert.equal(e.code, grpc.status.INTERNAL);
    assert.match(e.details, /^worker died/);
  });

  test("a call's deadline is the request's: DEADLINE_EXCEEDED, and the queued work is dropped", async () => {
    const slow = (sleepMs: number, deadlineMs?: number) =>
      client.call("ModelInfer", { model_name: "slow", parameters: { sleepMs: { int64_param: String(sleepMs) } }, inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([sleepMs])] }, { deadlineMs });
    const before = (await client.call("ModelStatistics", { name: "slow" })).model_stats[0].inference_count;
    const busy = slow(1500);
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "slow" }, (v) => v === 0);
    const late = await slow(0, 300).catch((err) => err);
    assert.equal(late.code, grpc.status.DEADLINE_EXCEEDED);
    await busy;
    // Only the busy request reached the model: the late one left the queue unserved.
    const stats = (await client.call("ModelStatistics", { name: "slow" })).model_stats[0];
    assert.equal(Number(stats.inference_count) - Number(before), 1);
  });

  test("a cancelled call's queued request is dropped", async () => {
    const before = Number((await client.call("ModelStatistics", { name: "slow" })).model_stats[0].inference_count);
    const request = (sleepMs: number) => ({ model_name: "slow", parameters: { sleepMs: { int64_param: String(sleepMs) } }, inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([1])] });
    const busy = client.call("ModelInfer", request(1000));
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "slow" }, (v) => v === 0);
    const cancelled = new Promise<number>((resolve) => {
      const call = client.client.ModelInfer(request(0), (err: grpc.ServiceError | null) => resolve(err?.code ?? 0));
      waitForMetric(server.url, "shoal_stage_queue_depth", { model: "slow" }, (v) => v === 1).then(() => call.cancel());
    });
    assert.equal(await cancelled, grpc.status.CANCELLED);
    await waitForMetric(server.url, "shoal_stage_queue_depth", { model: "slow" }, (v) => v === 0);
    await busy;
    const after = Number((await client.call("ModelStatistics", { name: "slow" })).model_stats[0].inference_count);
    assert.equal(after - before, 1);
  });

  test("ModelStreamInfer: 100 requests on one stream, answered as they finish, an error in the stream", async () => {
    // Messages serialized here, so that one may be bytes that are not protobuf.
    const service = definition["inference.GRPCInferenceService"] as any;
    const bytes = (b: Buffer) => b;
    const raw = client.client.makeBidiStreamRequest("/inference.GRPCInferenceService/ModelStreamInfer", bytes, bytes, new grpc.Metadata());
    const call = { write: (m: object | Buffer) => raw.write(Buffer.isBuffer(m) ? m : service.ModelStreamInfer.requestSerialize(m)), end: () => raw.end(), on: raw.on.bind(raw) };
    const answers: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on("data", (message: Buffer) => answers.push(service.ModelStreamInfer.responseDeserialize(message)));
      call.on("end", resolve);
      call.on("error", reject);
    });
    for (let i = 0; i < 100; i++) {
      const parameters = i === 50 ? { fail: { string_param: "number fifty" } } : {};
      call.write({ model_name: "echo", id: `s${i}`, parameters, inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([i])] });
    }
    call.write({ model_name: "nope", id: "lost" });
    // A message that is not protobuf: its error goes in the stream, which goes on.
    call.write(Buffer.from([0xff, 0xff, 0xff]));
    call.write({ model_name: "echo", id: "last", inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([100])] });
    call.end();
    await done;
    assert.equal(answers.length, 103);
    const errors = answers.filter((a) => a.error_message !== "").map((a) => a.error_message.replace(/: .*/s, "")).sort();
    assert.deepEqual(errors, ["bad request", "bad request", "not found"]);
    const ok = answers.filter((a) => a.error_message === "").map((a) => a.infer_response);
    assert.equal(ok.length, 100);
    for (const response of ok) {
      const i = response.id === "last" ? 100 : Number(response.id.slice(1));
      assert.deepEqual(readFp32(response.raw_output_contents[response.outputs.findIndex((o: any) => o.name === "x_out")]), [i]);
    }
  });

  test("one batch mixes REST and gRPC requests", async () => {
    const grpcCalls = Array.from({ length: 8 }, (_, i) => client.call("ModelInfer", { model_name: "mixed", inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([i])] }));
    const restCalls = Array.from({ length: 8 }, (_, i) => post(`${server.url}/v2/models/mixed/infer`, { inputs: [{ name: "x", datatype: "FP32", shape: [1], data: [i] }] }));
    const [fromGrpc, fromRest] = await Promise.all([Promise.all(grpcCalls), Promise.all(restCalls)]);
    const grpcBatches = fromGrpc.map((r) => r.raw_output_contents[r.outputs.findIndex((o: any) => o.name === "batch")].readInt32LE(0));
    const restBatches = fromRest.map((r) => r.json.outputs.find((o: any) => o.name === "batch").data[0]);
    assert.deepEqual([...grpcBatches, ...restBatches], new Array(16).fill(16));
    assert.equal(await metric(server.url, "shoal_stage_batch_size_count", { model: "mixed" }), 1);
    assert.equal(await metric(server.url, "shoal_stage_batch_size_sum", { model: "mixed" }), 16);
    const text = (await send(`${server.url}/metrics`)).text;
    assert.match(text, /shoal_requests_total\{route="\/v2\/models\/mixed\/infer",code="200",protocol="grpc"\} 8/);
    assert.match(text, /shoal_requests_total\{route="\/v2\/models\/mixed\/infer",code="200",protocol="http"\} 8/);
  });

  test("repository index, unload and load with the admin token, statistics", async () => {
    const auth = { metadata: { authorization: `Bearer ${TOKEN}` } };
    const index = (await client.call("RepositoryIndex", {})).models.map((m: any) => `${m.name}:${m.state}`).sort();
    assert.deepEqual(index, ["echo:READY", "mixed:READY", "scale:READY", "slow:READY"]);
    assert.deepEqual(await client.call("RepositoryModelUnload", { model_name: "scale" }, auth), {});
    assert.equal((await client.error("ModelInfer", { model_name: "scale" })).code, grpc.status.NOT_FOUND);
    assert.deepEqual((await client.call("RepositoryIndex", { ready: true })).models.map((m: any) => m.name).sort(), ["echo", "mixed", "slow"]);
    assert.deepEqual(await client.call("RepositoryModelLoad", { model_name: "scale" }, auth), {});
    const response = await client.call("ModelInfer", { model_name: "scale", inputs: [{ name: "x", datatype: "FP32", shape: [2] }], raw_input_contents: [fp32([1, 2])] });
    assert.deepEqual(readFp32(response.raw_output_contents[0]), [2, 4]);
    assert.equal((await client.error("RepositoryModelLoad", { model_name: "missing" }, auth)).code, grpc.status.NOT_FOUND);
    const stats = (await client.call("ModelStatistics", {})).model_stats;
    assert.deepEqual(stats.map((s: any) => s.name).sort(), ["echo", "mixed", "scale", "slow"]);
    const echo = stats.find((s: any) => s.name === "echo");
    assert.ok(Number(echo.inference_count) > 100);
    assert.ok(Number(echo.inference_stats.success.count) > 100);
  });

  test("gRPC health checking and server reflection", async () => {
    const health = healthClient(port);
    const check = (service: string) => new Promise<any>((resolve, reject) => health.Check({ service }, (err: unknown, r: unknown) => (err ? reject(err) : resolve(r))));
    try {
      assert.equal((await check("")).status, "SERVING");
      assert.equal((await check("inference.GRPCInferenceService")).status, "SERVING");
    } finally {
      health.close();
    }
    const reflectionDef = loadSync("grpc/reflection/v1/reflection.proto", { keepCase: true, includeDirs: [join(ROOT, "node_modules", "@grpc", "reflection", "build", "proto")] });
    const Reflection = (grpc.loadPackageDefinition(reflectionDef) as any).grpc.reflection.v1.ServerReflection;
    const reflection = new Reflection(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const services = await new Promise<string[]>((resolve, reject) => {
      const call = reflection.ServerReflectionInfo({ deadline: Date.now() + 10_000 });
      call.on("data", (r: any) => {
        resolve(r.list_services_response.service.map((s: any) => s.name));
        call.end();
      });
      call.on("error", reject);
      call.write({ list_services: "" });
    });
    reflection.close();
    assert.ok(services.includes("inference.GRPCInferenceService"), services.join());
    assert.ok(services.includes("grpc.health.v1.Health"), services.join());
  });

  test("gzip-compressed requests are accepted", async () => {
    const gzip = new V2Client(port, { "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip });
    const response = await gzip.call("ModelInfer", { model_name: "echo", inputs: [{ name: "x", datatype: "FP32", shape: [1000] }], raw_input_contents: [fp32(new Array(1000).fill(0.5))] });
    assert.deepEqual(readFp32(response.raw_output_contents[response.outputs.findIndex((o: any) => o.name === "x_out")]), new Array(1000).fill(0.5));
    gzip.close();
  });

  test("answers gzip-compressed to a gzip-compressed request of a client that accepts gzip, when the answer is 1 KiB or more", async () => {
    const big = inferMessage(1000);
    const gzipped = await rawCall(port, "ModelInfer", big, { gzip: true, accept: "identity,deflate,gzip" });
    assert.equal(gzipped.trailers["grpc-status"], "0");
    assert.equal(gzipped.headers["grpc-encoding"], "gzip");
    assert.deepEqual(
      gzipped.messages.map((m) => m.compressed),
      [true],
    );
    assert.deepEqual(echoed(gzipped), new Array(1000).fill(0.25));
    // Below 1 KiB: the same header, the message as it is (flag 0).
    const small = await rawCall(port, "ModelInfer", inferMessage(4), { gzip: true, accept: "gzip" });
    assert.equal(small.headers["grpc-encoding"], "gzip");
    assert.deepEqual(
      small.messages.map((m) => m.compressed),
      [false],
    );
    assert.deepEqual(echoed(small), [0.25, 0.25, 0.25, 0.25]);
    // An uncompressed request, or a client that does not take gzip: an uncompressed answer.
    for (const options of [{ accept: "identity,deflate,gzip" }, { gzip: true, accept: "identity,deflate" }, { gzip: true }]) {
      const plain = await rawCall(port, "ModelInfer", big, options);
      assert.notEqual(plain.headers["grpc-encoding"], "gzip", JSON.stringify(options));
      assert.deepEqual(
        plain.messages.map((m) => m.compressed),
        [false],
      );
      assert.deepEqual(echoed(plain), new Array(1000).fill(0.25));
    }
  });

  test("ModelStreamInfer: answers gzip-compressed on a compressed stream, each decoded right by @grpc/grpc-js", async () => {
    const gzip = new V2Client(port, { "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip });
    const stream = gzip.client.ModelStreamInfer();
    const answers: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on("data", (m: any) => answers.push(m));
      stream.on("end", resolve);
      stream.on("error", reject);
    });
    for (let i = 0; i < 20; i++) stream.write({ model_name: "echo", id: String(i), inputs: [{ name: "x", datatype: "FP32", shape: [i % 2 === 0 ? 1000 : 2] }], raw_input_contents: [fp32(new Array(i % 2 === 0 ? 1000 : 2).fill(i))] });
    stream.end();
    await done;
    gzip.close();
    assert.equal(answers.length, 20);
    for (const { error_message, infer_response: r } of answers) {
      assert.equal(error_message, "");
      const i = Number(r.id);
      assert.deepEqual(readFp32(r.raw_output_contents[r.outputs.findIndex((o: any) => o.name === "x_out")]), new Array(i % 2 === 0 ? 1000 : 2).fill(i));
    }
  });
});

const inferService = (definition["inference.GRPCInferenceService"] as any);

// A ModelInfer request of n FP32 elements of 0.25 for the echo model, serialized.
function inferMessage(n: number): Buffer {
  return inferService.ModelInfer.requestSerialize({ model_name: "echo", inputs: [{ name: "x", datatype: "FP32", shape: [n] }], outputs: [{ name: "x_out" }], raw_input_contents: [fp32(new Array(n).fill(0.25))] });
}

// The echoed tensor of a raw answer, inflated if its message was compressed.
function echoed(answer: RawAnswer): number[] {
  const [message] = answer.messages;
  const response = inferService.ModelInfer.responseDeserialize(message!.compressed ? gunzipSync(message!.bytes) : message!.bytes);
  return readFp32(response.raw_output_contents[0]);
}

describe("gRPC while draining, answers compressed always", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let port: number;

  before(async () => {
    repo.module("echo", "echo.ts", { maxBatchSize: 1 });
    port = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(port), "--timeout", "10000", "--grpc-compression", "always"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("--grpc-compression always: answers of 1 KiB or more are gzipped for any client that accepts gzip", async () => {
    const gzipped = await rawCall(port, "ModelInfer", inferMessage(1000), { accept: "identity,deflate,gzip" });
    assert.equal(gzipped.headers["grpc-encoding"], "gzip");
    assert.deepEqual(
      gzipped.messages.map((m) => m.compressed),
      [true],
    );
    assert.deepEqual(echoed(gzipped), new Array(1000).fill(0.25));
    const plain = await rawCall(port, "ModelInfer", inferMessage(1000), { accept: "identity" });
    assert.deepEqual(
      plain.messages.map((m) => m.compressed),
      [false],
    );
    assert.deepEqual(echoed(plain), new Array(1000).fill(0.25));
  });

  test("load and unload are refused while model control is off", async () => {
    const client = new V2Client(port);
    const e = await client.error("RepositoryModelLoad", { model_name: "echo" });
    assert.equal(e.code, grpc.status.PERMISSION_DENIED);
    client.close();
  });

  test("on SIGTERM, calls in flight are answered and new ones are UNAVAILABLE", async () => {
    const client = new V2Client(port);
    const request = { model_name: "echo", parameters: { sleepMs: { int64_param: "1500" } }, inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([7])] };
    const inFlight = client.call("ModelInfer", request);
    await waitForMetric(server.url, "shoal_requests_in_flight", {}, (v) => v === 1);
    // Health checking's Watch hears the server stop serving.
    const health = healthClient(port);
    const watched: string[] = [];
    const watch = health.Watch({ service: "" });
    watch.on("error", () => {});
    const notServing = new Promise<void>((resolve) =>
      watch.on("data", ({ status }: { status: string }) => {
        watched.push(status);
        if (status === "NOT_SERVING") resolve();
      }),
    );
    await waitFor("the first status", () => (watched.length > 0 ? true : undefined));
    server.proc.kill("SIGTERM");
    await server.waitForLog((l) => l.msg === "draining");
    const refused = await client.error("ModelInfer", { ...request, parameters: {} });
    assert.equal(refused.code, grpc.status.UNAVAILABLE);
    assert.equal(refused.details, "service unavailable: the server is shutting down");
    assert.deepEqual((await client.call("ServerReady", {})).ready, false);
    await notServing;
    assert.deepEqual(watched, ["SERVING", "NOT_SERVING"]);
    watch.cancel();
    health.close();
    const answered = await inFlight;
    assert.deepEqual(readFp32(answered.raw_output_contents[answered.outputs.findIndex((o: any) => o.name === "x_out")]), [7]);
    assert.equal(await server.exitCode(), 0);
    client.close();
  });
});

// A client of grpc.health.v1.Health.
function healthClient(port: number): any {
  const healthDef = loadSync("health/v1/health.proto", { includeDirs: [join(ROOT, "node_modules", "grpc-health-check", "proto")], enums: String });
  const Health = (grpc.loadPackageDefinition(healthDef) as any).grpc.health.v1.Health;
  return new Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

// The package's own definition is what the client above was made from.
assert.ok(definition["inference.GRPCInferenceService"]);

describe("--max-connections 2 on the gRPC port", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let port: number;

  before(async () => {
    repo.module("echo", "echo.ts", {});
    port = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(port), "--max-connections", "2"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("a third connection is closed at once; the two others are still answered", async () => {
    const { connect } = await import("node:http2");
    const open = () => {
      const session = connect(`http://127.0.0.1:${port}`);
      session.on("error", () => {});
      // Settled by the server's SETTINGS (taken) or by the connection closing first (refused).
      const taken = new Promise<boolean>((resolve) => {
        session.once("remoteSettings", () => resolve(true));
        session.once("close", () => resolve(false));
      });
      return { session, taken };
    };
    const live = (session: ReturnType<typeof connect>) =>
      new Promise<unknown>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/inference.GRPCInferenceService/ServerLive", "content-type": "application/grpc", te: "trailers" });
        stream.on("trailers", (trailers) => resolve(trailers["grpc-status"]));
        stream.on("error", reject);
        stream.on("data", () => {});
        stream.end(Buffer.alloc(5));
      });
    const two = [open(), open()];
    assert.deepEqual(await Promise.all(two.map((c) => c.taken)), [true, true]);
    const third = open();
    assert.equal(await third.taken, false, "the third connection was not closed");
    assert.deepEqual(await Promise.all(two.map((c) => live(c.session))), ["0", "0"]);
    for (const c of [...two, third]) c.session.destroy();
    assert.equal(server.exited, false);
  });
});

describe("gRPC messages still arriving are held against --max-inflight-bytes", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let port: number;
  const MiB = 2 ** 20;

  before(async () => {
    repo.module("echo", "echo.ts", {});
    port = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(port), "--max-request-size", String(2 * MiB), "--max-inflight-bytes", String(4 * MiB)]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  // Bun's node:http2 server resets every stream of a connection when one is reset (README: On Bun).
  test("unfinished messages on many streams of one connection hold the budget; a stream past it is reset, and leaving returns every byte", { skip: RUNTIME === "bun" ? "Bun's HTTP/2 server resets the connection's other streams too (README: On Bun)" : false }, async () => {
    const { connect, constants } = await import("node:http2");
    const session = connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: 2 ** 31 - 1 } });
    session.on("error", () => {});
    // Six ModelInfer calls, each declaring a message of 1.5 MiB and sending 1 MiB of it: 6 MiB
    // sent, of which a 4 MiB budget holds at most four calls' worth.
    const resets: number[] = [];
    const streams = Array.from({ length: 6 }, () => {
      const stream = session.request({ ":method": "POST", ":path": "/inference.GRPCInferenceService/ModelInfer", "content-type": "application/grpc", te: "trailers" });
      stream.on("error", () => {});
      stream.on("close", () => resets.push(stream.rstCode ?? -1));
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(1.5 * MiB, 1);
      stream.write(Buffer.concat([prefix, Buffer.alloc(MiB, 1)]));
      return stream;
    });
    const url = server.url;
    await waitFor("streams past the budget reset", () => (resets.length >= 2 ? true : undefined));
    assert.ok(resets.every((code) => code === constants.NGHTTP2_ENHANCE_YOUR_CALM), `reset with ${resets.join(", ")}`);
    const held = (await metric(url, "shoal_request_bytes_in_flight"))!;
    assert.ok(held <= 4 * MiB && held >= 2 * MiB, `${held} bytes held`);
    // The REST front shares the budget: a body that does not fit what is left is 429 now.
    const rest = await post(`${server.url}/v2/models/echo/infer`, { inputs: [{ name: "text", datatype: "BYTES", shape: [1], data: ["x".repeat(4 * MiB - held + 1024)] }] });
    assert.equal(rest.status, 429, rest.text);
    for (const stream of streams) stream.close();
    session.close();
    await waitForMetric(url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
    const after = await post(`${server.url}/v2/models/echo/infer`, { inputs: [{ name: "text", datatype: "BYTES", shape: [1], data: ["x".repeat(MiB)] }] });
    assert.equal(after.status, 200, after.text);
    assert.equal(server.exited, false);
  });

  test("a stream of requests returns each message's bytes once it is whole", async () => {
    const { session, stream, answers } = await openCall(port, "/inference.GRPCInferenceService/ModelStreamInfer");
    // Three whole messages of 1.5 MiB each (an unparseable request is answered with an error
    // message, and the stream goes on): 4.5 MiB in all, more than the budget held at once.
    for (let i = 0; i < 3; i++) {
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(1.5 * MiB, 1);
      stream.write(Buffer.concat([prefix, Buffer.alloc(1.5 * MiB, 0xff)]));
    }
    await waitFor("three answers", () => (Buffer.concat(answers).length > 0 && countMessages(Buffer.concat(answers)) >= 3 ? true : undefined));
    assert.match(Buffer.concat(answers).toString("latin1"), /bad request: the message is not a valid ModelInferRequest/);
    assert.equal(stream.closed, false, "the stream goes on");
    // Each message's bytes went back once it was whole and answered, the stream still open
    // with its share of the budget.
    await waitForMetric(server.url, "shoal_request_bytes_in_flight", {}, (v) => v === CALL_SHARE);
    stream.close();
    session.close();
    await waitForMetric(server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });

  test("a reflection stream left open holds only its share of the budget once its requests are answered", async () => {
    const { session, stream, answers } = await openCall(port, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
    // ServerReflectionRequest { list_services: "*" }, three times, the stream left open.
    const listServices = Buffer.from([0, 0, 0, 0, 3, 0x3a, 0x01, 0x2a]);
    for (let i = 0; i < 3; i++) stream.write(listServices);
    await waitFor("three answers", () => (countMessages(Buffer.concat(answers)) >= 3 ? true : undefined));
    assert.match(Buffer.concat(answers).toString("latin1"), /inference\.GRPCInferenceService/);
    assert.equal(await metric(server.url, "shoal_request_bytes_in_flight"), CALL_SHARE);
    stream.close();
    session.close();
    await waitForMetric(server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });
});

// A raw HTTP/2 call of `path`, left open, gathering what it is answered.
async function openCall(port: number, path: string) {
  const { connect } = await import("node:http2");
  const session = connect(`http://127.0.0.1:${port}`);
  session.on("error", () => {});
  const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
  stream.on("error", () => {});
  const answers: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => answers.push(chunk));
  return { session, stream, answers };
}

// How many whole gRPC messages `bytes` holds.
function countMessages(bytes: Buffer): number {
  let n = 0;
  for (let at = 0; at + 5 <= bytes.length; at += 5 + bytes.readUInt32BE(at + 1)) n++;
  return n;
}
