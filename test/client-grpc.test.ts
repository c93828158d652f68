/**
 * `shoal/client/grpc` against a real Shoal server's V2 gRPC service: health, metadata, ModelInfer
 * with tensors of every kind (the same answers as REST's), ModelStreamInfer with its per-request
 * errors and a cancellation mid-stream, the repository with the admin token, statistics,
 * deadlines, gzip, and errors as GrpcErrors.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "shoal/client";
import { GrpcClient, GrpcError, outputOf, textOf, type StreamAnswer } from "shoal/client/grpc";
import { clientModels, startClientServer, TOKEN } from "./client-helpers.js";
import { freePort } from "./grpc-helpers.js";
import type { ServerProcess } from "./helpers.js";

describe("shoal/client/grpc", () => {
  const repo = clientModels();
  let server: ServerProcess;
  let grpc: GrpcClient;
  let address: string;

  before(async () => {
    const port = await freePort();
    server = await startClientServer(repo, ["--grpc-port", String(port)]);
    await server.waitForLog((l) => l.msg?.startsWith("gRPC listening") ?? false);
    address = `127.0.0.1:${port}`;
    grpc = new GrpcClient(address, { adminToken: TOKEN });
  });
  after(async () => {
    grpc?.close();
    await server?.stop();
    repo.remove();
  });

  test("health and metadata", async () => {
    assert.equal(await grpc.live(), true);
    assert.equal(await grpc.ready(), true);
    assert.equal(await grpc.modelReady("scale"), true);
    const meta = await grpc.serverMetadata();
    assert.equal(meta.name, "shoal");
    assert.ok(meta.extensions.includes("binary_tensor_data"));
    const scale = await grpc.modelMetadata("scale");
    assert.equal(scale.name, "scale");
    assert.equal((await grpc.modelConfig("upper")).name, "upper");
  });

  test("ModelInfer with tensors of every kind answers as REST does", async () => {
    const inputs = [
      { name: "f32", data: Float32Array.of(0.5, -1.25), shape: [1, 2] },
      { name: "i64", data: BigInt64Array.of(-(2n ** 62n)) },
      { name: "half", datatype: "FP16" as const, data: Uint16Array.of(0x3c00) },
      { name: "flag", data: [true, false] },
      { name: "text", data: ["fish", "ünïcode"] },
    ];
    const overGrpc = await grpc.infer("echo", { id: "g1", parameters: { note: "kept" }, inputs });
    const overRest = await new Client(server.url).v2.infer("echo", { id: "g1", inputs }, { binary: true });
    assert.equal(overGrpc.id, "g1");
    assert.equal(overGrpc.model_name, "echo");
    for (const name of ["f32_out", "i64_out", "half_out", "flag_out", "text_out"]) {
      const [a, b] = [outputOf(overGrpc, name), outputOf(overRest, name)];
      assert.equal(a.datatype, b.datatype, name);
      assert.deepEqual(a.shape, b.shape, name);
      assert.deepEqual(Array.isArray(a.data) ? textOf(a) : [...a.data], Array.isArray(b.data) ? textOf(b) : [...b.data], name);
      assert.equal(a.data.constructor, b.data.constructor, name);
    }
    assert.deepEqual(outputOf(overGrpc, "f32_out").shape, [1, 2]);
  });

  test("errors are GrpcErrors with the code and the server's message", async () => {
    await assert.rejects(grpc.infer("no-such-model", { inputs: [{ name: "x", data: Float32Array.of(1) }] }), (err: unknown) => {
      assert.ok(err instanceof GrpcError);
      assert.equal(err.codeName, "NOT_FOUND");
      assert.equal(err.code, 5);
      assert.match(err.details, /no-such-model/);
      return true;
    });
    await assert.rejects(grpc.infer("upper", { inputs: [{ name: "text", data: Float32Array.of(1) }] }), { codeName: "INVALID_ARGUMENT", message: /input 'text' must be BYTES/ });
  });

  test("a deadline is DEADLINE_EXCEEDED; a signal cancels with its reason", async () => {
    await assert.rejects(grpc.infer("scale", { parameters: { sleepMs: 1000 }, inputs: [{ name: "x", data: Float32Array.of(1) }] }, { timeoutMs: 150 }), { codeName: "DEADLINE_EXCEEDED" });
    const controller = new AbortController();
    const call = grpc.infer("scale", { parameters: { sleepMs: 1000 }, inputs: [{ name: "x", data: Float32Array.of(1) }] }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(call, { name: "AbortError" });
  });

  test("gzip-compressed messages", async () => {
    const gzip = new GrpcClient(address, { compression: "gzip" });
    try {
      const y = outputOf(await gzip.infer("scale", { inputs: [{ name: "x", data: new Float32Array(10_000).fill(3) }] }), "y").data as Float32Array;
      assert.equal(y.length, 10_000);
      assert.equal(y[9_999], 6);
    } finally {
      gzip.close();
    }
  });

  test("ModelStreamInfer: answers matched by id, a request's error does not end the stream", async () => {
    const stream = grpc.stream();
    for (const id of ["a", "b", "c"]) stream.send("scale", { id, inputs: [{ name: "x", data: Float32Array.of(id.charCodeAt(0)) }] });
    stream.send("upper", { id: "bad", inputs: [{ name: "text", data: Float32Array.of(1) }] });
    stream.send("spell", { id: "s", inputs: [{ name: "text_input", data: ["hi"] }] });
    stream.end();
    const answers: StreamAnswer[] = [];
    for await (const answer of stream) answers.push(answer);
    const ok = answers.flatMap((a) => (a.ok ? [a.response] : []));
    const scaled = Object.fromEntries(ok.filter((r) => r.model_name === "scale").map((r) => [r.id, (outputOf(r, "y").data as Float32Array)[0]]));
    assert.deepEqual(scaled, { a: 194, b: 196, c: 198 });
    // A model that streams is answered once, its chunks joined, or once a chunk: the same characters.
    assert.deepEqual(ok.filter((r) => r.model_name === "spell").flatMap((r) => textOf(outputOf(r, "text_output"))), ["h", "i"]);
    const errors = answers.flatMap((a) => (a.ok ? [] : [a.error]));
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /input 'text' must be BYTES/);
  });

  test("ModelStreamInfer cancelled mid-stream by its signal: the call ends, its work is dropped", async () => {
    const controller = new AbortController();
    const stream = grpc.stream({ signal: controller.signal });
    stream.send("spell", { id: "short", inputs: [{ name: "text_input", data: ["ab"] }] });
    // 200 characters 50 ms apart: 10 s of work, unless the cancellation ends it.
    stream.send("spell", { id: "long", parameters: { delay_ms: 50 }, inputs: [{ name: "text_input", data: ["x".repeat(200)] }] });
    const got: string[] = [];
    const started = Date.now();
    await assert.rejects(
      (async () => {
        for await (const answer of stream) {
          if (answer.ok) got.push(answer.response.id ?? "");
          controller.abort();
        }
      })(),
      { name: "AbortError" },
    );
    assert.deepEqual(got, ["short"]);
    const again = await grpc.infer("spell", { inputs: [{ name: "text_input", data: ["ok"] }] });
    assert.deepEqual(textOf(outputOf(again, "text_output")), ["o", "k"]);
    assert.ok(Date.now() - started < 5000, `the cancelled request's 10 s of work still held the worker: ${Date.now() - started} ms`);
  });

  test("the repository with the admin token (UNAUTHENTICATED without it), and statistics", async () => {
    assert.deepEqual((await grpc.repositoryIndex()).map((e) => e.name).sort(), ["echo", "scale", "spell", "upper"]);
    const anonymous = new GrpcClient(address);
    try {
      await assert.rejects(anonymous.unload("upper"), { codeName: "UNAUTHENTICATED" });
    } finally {
      anonymous.close();
    }
    await grpc.unload("upper");
    // Over gRPC a model that is not loaded is an error of ModelReady, as Triton answers it.
    await assert.rejects(grpc.modelReady("upper"), { codeName: "NOT_FOUND" });
    assert.deepEqual((await grpc.repositoryIndex({ ready: true })).map((e) => e.name).sort(), ["echo", "scale", "spell"]);
    await grpc.load("upper");
    assert.equal(await grpc.modelReady("upper"), true);
    const [scale] = await grpc.statistics("scale");
    assert.equal(scale!.name, "scale");
    assert.ok(Number(scale!.inference_count) >= 1);
    assert.ok((await grpc.statistics()).length >= 4);
  });
});
