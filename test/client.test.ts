/**
 * `shoal/client` against a real Shoal server in a subprocess: every call of its V2 REST side
 * (JSON and binary tensors, compression, streams, the repository with the admin token,
 * statistics), its plain routes (JSON, MessagePack, streams cancelled mid-way), the OpenAI routes
 * (its helper and the `openai` package), deadlines, cancellation and typed errors.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { Client, HttpError, outputOf, packTensor, StreamError, textOf, unpackTensor } from "shoal/client";
import { clientModels, startClientServer, TOKEN } from "./client-helpers.js";
import type { ServerProcess } from "./helpers.js";

describe("shoal/client over HTTP", () => {
  const repo = clientModels();
  let server: ServerProcess;
  let client: Client;

  before(async () => {
    server = await startClientServer(repo);
    client = new Client(server.url, { adminToken: TOKEN });
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("health and metadata", async () => {
    assert.equal(await client.v2.live(), true);
    assert.equal(await client.v2.ready(), true);
    assert.equal(await client.v2.modelReady("scale"), true);
    assert.equal(await client.v2.modelReady("no-such-model"), false);
    const meta = await client.v2.serverMetadata();
    assert.equal(meta.name, "shoal");
    assert.ok(meta.extensions.includes("binary_tensor_data"), meta.extensions.join());
    const upper = await client.v2.modelMetadata("upper");
    assert.equal(upper.name, "upper");
    assert.deepEqual(upper.inputs, []);
    assert.equal(typeof (await client.v2.modelConfig("scale")).name, "string");
  });

  test("infer with JSON tensors: typed arrays in, typed arrays out", async () => {
    const response = await client.v2.infer("scale", { id: "j1", inputs: [{ name: "x", data: Float32Array.of(1, 2.5, -3), shape: [1, 3] }] });
    assert.equal(response.model_name, "scale");
    assert.equal(response.id, "j1");
    const y = outputOf(response, "y");
    assert.equal(y.datatype, "FP32");
    assert.deepEqual(y.shape, [1, 3]);
    assert.ok(y.data instanceof Float32Array);
    assert.deepEqual([...y.data], [2, 5, -6]);
  });

  test("infer with binary tensors of every kind gives what JSON gives", async () => {
    const inputs = [
      { name: "f32", data: Float32Array.of(0.5, -1.25) },
      { name: "f64", data: Float64Array.of(Math.PI) },
      { name: "i64", data: BigInt64Array.of(-(2n ** 62n), 7n) },
      { name: "u8", data: Uint8Array.of(0, 255) },
      { name: "half", datatype: "FP16" as const, data: Uint16Array.of(0x3c00) },
      { name: "flag", data: [true, false, true] },
      { name: "text", data: ["fish", "ünïcode"] },
      { name: "counts", datatype: "INT32" as const, data: [1, 2, 3, 4], shape: [2, 2] },
    ];
    const binary = await client.v2.infer("echo", { inputs }, { binary: true });
    const json = await client.v2.infer("echo", { inputs });
    for (const response of [binary, json]) {
      assert.deepEqual([...(outputOf(response, "f32_out").data as Float32Array)], [0.5, -1.25]);
      assert.deepEqual([...(outputOf(response, "f64_out").data as Float64Array)], [Math.PI]);
      assert.deepEqual([...(outputOf(response, "i64_out").data as BigInt64Array)], [-(2n ** 62n), 7n]);
      assert.deepEqual([...(outputOf(response, "u8_out").data as Uint8Array)], [0, 255]);
      const half = outputOf(response, "half_out");
      assert.equal(half.datatype, "FP16");
      assert.deepEqual([...(half.data as Uint16Array)], [0x3c00]);
      assert.equal(outputOf(response, "flag_out").datatype, "BOOL");
      assert.deepEqual([...(outputOf(response, "flag_out").data as Uint8Array)], [1, 0, 1]);
      assert.deepEqual(textOf(outputOf(response, "text_out")), ["fish", "ünïcode"]);
      const counts = outputOf(response, "counts_out");
      assert.deepEqual(counts.shape, [2, 2]);
      assert.ok(counts.data instanceof Int32Array);
    }
  });

  test("request bodies go gzipped when asked, and large answers come back compressed", async () => {
    // A fetch that watches what goes out and what comes back.
    const seen: { encoding?: string; sent: number; answered?: string | null }[] = [];
    const watched = new Client(server.url, {
      compression: "gzip",
      fetch: async (input, init) => {
        const headers = init?.headers as Record<string, string>;
        const response = await fetch(input, init);
        seen.push({ encoding: headers["content-encoding"], sent: (init?.body as Uint8Array).byteLength, answered: response.headers.get("content-encoding") });
        return response;
      },
    });
    const x = new Float32Array(50_000).fill(1);
    const response = await watched.v2.infer("scale", { inputs: [{ name: "x", data: x }] }, { binary: true });
    const y = outputOf(response, "y").data as Float32Array;
    assert.equal(y.length, 50_000);
    assert.equal(y[49_999], 2);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.encoding, "gzip");
    assert.ok(seen[0]!.sent < 5_000, `sent ${seen[0]!.sent} bytes for a 200 000-byte tensor`);
    assert.match(seen[0]!.answered ?? "", /^(gzip|br|zstd|deflate)$/);
  });

  test("errors carry the status and the server's message", async () => {
    await assert.rejects(client.v2.infer("no-such-model", { inputs: [{ name: "x", data: Float32Array.of(1) }] }), (err: unknown) => {
      assert.ok(err instanceof HttpError);
      assert.equal(err.status, 404);
      assert.match(err.message, /no-such-model/);
      return true;
    });
    await assert.rejects(client.v2.infer("upper", { inputs: [{ name: "text", data: Float32Array.of(1) }] }), (err: unknown) => {
      assert.ok(err instanceof HttpError);
      assert.equal(err.status, 400);
      assert.match(err.message, /input 'text' must be BYTES/);
      assert.deepEqual(Object.keys(err.body as object), ["error"]);
      return true;
    });
    await assert.rejects(client.v2.infer("scale", { inputs: [{ name: "x", datatype: "FP32", data: [1, 2, 3], shape: [2] }] }), TypeError);
  });

  test("a deadline rejects with the TimeoutError of AbortSignal.timeout", async () => {
    const started = Date.now();
    await assert.rejects(client.v2.infer("scale", { parameters: { sleepMs: 1000 }, inputs: [{ name: "x", data: Float32Array.of(1) }] }, { timeoutMs: 200 }), { name: "TimeoutError" });
    assert.ok(Date.now() - started < 900);
  });

  test("the generate extension, whole and streamed; infer_stream", async () => {
    assert.deepEqual(await client.v2.generate("spell", { text_input: "ab" }), { model_name: "spell", text_output: ["a", "b"] });
    const chunks = [];
    for await (const chunk of client.v2.generateStream("spell", { text_input: "fish", id: "g1" })) chunks.push(chunk);
    assert.deepEqual(chunks, ["f", "i", "s", "h"].map((c) => ({ model_name: "spell", id: "g1", text_output: c })));
    const streamed = [];
    for await (const response of client.v2.inferStream("spell", { inputs: [{ name: "text_input", data: ["ok"] }] })) streamed.push(textOf(outputOf(response, "text_output")));
    assert.deepEqual(streamed, [["o"], ["k"]]);
  });

  test("plain routes: JSON, and MessagePack with tensors as bytes", async () => {
    assert.deepEqual(await client.post("/double", { x: 21 }), { y: 42 });
    const answer = await client.post<{ y: unknown; tag: string }>("/tensor", { x: packTensor(Float32Array.of(1, -2.5), [2]), tag: "t" }, { format: "msgpack" });
    assert.equal(answer.tag, "t");
    const y = unpackTensor(answer.y);
    assert.equal(y.type, "float32");
    assert.deepEqual([...y.data], [2, -5]);
    await assert.rejects(client.post("/no-such-route", {}), { name: "HttpError", status: 404 });
  });

  test("a route's stream as an async iterator, over SSE or NDJSON; an error after its start is a StreamError", async () => {
    for (const transport of ["sse", "ndjson"] as const) {
      const got = [];
      for await (const chunk of client.stream<{ i: number }>("/ticks", { n: 3 }, { transport })) got.push(chunk.i);
      assert.deepEqual(got, [0, 1, 2], transport);
    }
    const got: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of client.stream<{ i: number }>("/ticks", { n: 5, failAt: 2 })) got.push(chunk.i);
      })(),
      (err: unknown) => err instanceof StreamError && /internal error/.test(err.message),
    );
    assert.deepEqual(got, [0, 1]);
  });

  test("a stream cancelled mid-way by its signal, or left by a break, ends at the server", async () => {
    const controller = new AbortController();
    const got: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of client.stream<{ i: number }>("/ticks", { n: 200, delayMs: 50, tag: "aborted" }, { signal: controller.signal })) {
          got.push(chunk.i);
          if (got.length === 2) controller.abort();
        }
      })(),
      { name: "AbortError" },
    );
    assert.deepEqual(got, [0, 1]);
    const aborted = await server.waitForLog((l) => l.msg === "ticks ended" && l.tag === "aborted");
    assert.equal(aborted.aborted, true);
    assert.ok((aborted.sent as number) < 20, `sent ${String(aborted.sent)}`);
    for await (const chunk of client.stream<{ i: number }>("/ticks", { n: 200, delayMs: 50, tag: "left" })) if (chunk.i === 1) break;
    const left = await server.waitForLog((l) => l.msg === "ticks ended" && l.tag === "left");
    assert.equal(left.aborted, true);
    assert.ok((left.sent as number) < 20, `sent ${String(left.sent)}`);
  });

  test("the OpenAI routes through the client", async () => {
    assert.deepEqual(await client.openai.models(), ["echo"]);
    const completion = await client.openai.completion({ model: "echo", prompt: "one two three" });
    assert.equal(completion.choices[0]!.text, "one two three");
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    const chat = await client.openai.chat({ model: "echo", messages: [{ role: "user", content: "hi there" }] });
    assert.equal(chat.choices[0]!.message.content, "user: hi there");
    let text = "";
    for await (const chunk of client.openai.chatStream({ model: "echo", messages: [{ role: "user", content: "a b c" }], max_tokens: 3 })) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "user: a b");
    let streamed = "";
    for await (const chunk of client.openai.completionStream({ model: "echo", prompt: "x y" })) streamed += chunk.choices[0]?.text ?? "";
    assert.equal(streamed, "x y");
  });

  test("the openai package pointed at the server", async () => {
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
    const chat = await openai.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hello fish" }] });
    assert.equal(chat.choices[0]!.message.content, "user: hello fish");
    let text = "";
    for await (const chunk of await openai.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "p q" }], stream: true })) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "user: p q");
  });

  test("the repository: index, unload and load with the admin token; 401 without it", async () => {
    const index = await client.v2.repositoryIndex();
    assert.deepEqual(index.map((e) => e.name).sort(), ["echo", "scale", "spell", "upper"]);
    assert.ok(index.every((e) => e.state === "READY"), JSON.stringify(index));
    const anonymous = new Client(server.url);
    await assert.rejects(anonymous.v2.unload("upper"), (err: unknown) => err instanceof HttpError && err.status === 401 && err.headers.get("www-authenticate") !== null);
    await client.v2.unload("upper");
    assert.equal(await client.v2.modelReady("upper"), false);
    assert.deepEqual((await client.v2.repositoryIndex({ ready: true })).map((e) => e.name).sort(), ["echo", "scale", "spell"]);
    await client.v2.load("upper");
    assert.equal(await client.v2.modelReady("upper"), true);
    const response = await client.v2.infer("upper", { inputs: [{ name: "text", data: ["back"] }] });
    assert.deepEqual(textOf(outputOf(response, "upper")), ["BACK"]);
  });

  test("statistics of a model, and of every model", async () => {
    await client.v2.infer("scale", { inputs: [{ name: "x", data: Float32Array.of(1) }] });
    const [scale] = await client.v2.statistics("scale");
    assert.equal(scale!.name, "scale");
    assert.ok(Number(scale!.inference_count) >= 1);
    const all = await client.v2.statistics();
    assert.ok(all.some((s) => s.name === "spell"));
  });
});
