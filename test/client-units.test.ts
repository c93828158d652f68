/**
 * The client's pure parts, with no server: Server-Sent Events and NDJSON read from bodies cut at
 * any byte, error events as StreamErrors, tensors given as plain arrays, and the HTTP side
 * bundled for a browser (no module of Node.js in reach).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { build } from "esbuild";
import { ProtocolError, StreamError } from "../src/client/errors.js";
import { jsonChunks, serverSentEvents } from "../src/client/streams.js";
import { inferRequestMessage, inferResponse } from "../src/client/grpc/infer-messages.js";
import type { ContentsMessage } from "../src/grpc/messages.js";
import { toTensor } from "../src/client/tensors.js";
import { ROOT } from "./helpers.js";

// A body that arrives in these pieces.
function body(...pieces: string[]): ReadableStream<Uint8Array> {
  const bytes = pieces.map((p) => new TextEncoder().encode(p));
  return new ReadableStream({ pull: (c) => (bytes.length > 0 ? c.enqueue(bytes.shift()!) : c.close()) });
}

async function all<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

describe("the client's streams", () => {
  const text = 'data: {"i":1}\r\n\r\n: keep-alive\n\nevent: note\nid: 7\ndata: line one\ndata: line two\r\rdata: ü\n\n';

  // The last event id holds until another is sent, as EventSource keeps it.
  test("events read alike however the body is cut, CRLF and CR included", async () => {
    const expected = [{ event: "message", data: '{"i":1}' }, { event: "note", data: "line one\nline two", id: "7" }, { event: "message", data: "ü", id: "7" }];
    assert.deepEqual(await all(serverSentEvents(body(text))), expected);
    const bytes = new TextEncoder().encode(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const pieces = new ReadableStream<Uint8Array>({ start: (c) => (c.enqueue(bytes.slice(0, cut)), c.enqueue(bytes.slice(cut)), c.close()) });
      assert.deepEqual(await all(serverSentEvents(pieces)), expected, `cut at byte ${cut}`);
    }
  });

  test("JSON chunks end at [DONE]; an error event, or a chunk that is only an error, throws a StreamError", async () => {
    const sse = (t: string) => new Response(body(t), { headers: { "content-type": "text/event-stream" } });
    assert.deepEqual(await all(jsonChunks(sse('data: {"a":1}\n\ndata: [DONE]\n\ndata: {"b":2}\n\n'))), [{ a: 1 }]);
    const got: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of jsonChunks(sse('data: {"a":1}\n\nevent: error\ndata: {"error":"internal error: it broke"}\n\n'))) got.push(chunk);
      })(),
      (err: unknown) => err instanceof StreamError && err.message === "internal error: it broke",
    );
    assert.deepEqual(got, [{ a: 1 }]);
    await assert.rejects(all(jsonChunks(sse('data: {"error":{"message":"bad model","type":"invalid_request_error"}}\n\n'))), { name: "StreamError", message: "bad model" });
    const ndjson = new Response(body('{"i":0}\n{"i"', ':1}\n{"error":"stream backlog full"}\n'), { headers: { "content-type": "application/x-ndjson" } });
    await assert.rejects(all(jsonChunks(ndjson)), { name: "StreamError", message: "stream backlog full" });
    await assert.rejects(all(jsonChunks(sse("data: not json\n\n"))), ProtocolError);
  });
});

describe("the client's tensors", () => {
  test("typed arrays are used as they are; plain arrays converted once", () => {
    const data = Float32Array.of(1, 2);
    assert.equal(toTensor({ name: "x", data }).data, data);
    assert.deepEqual(toTensor({ name: "x", data, shape: [1, 2] }).shape, [1, 2]);
    assert.deepEqual(toTensor({ name: "n", datatype: "INT64", data: [1, 2] }).data, BigInt64Array.of(1n, 2n));
    assert.deepEqual(toTensor({ name: "b", data: [true, false] }), { name: "b", datatype: "BOOL", shape: [2], data: Uint8Array.of(1, 0) });
    assert.deepEqual(toTensor({ name: "s", data: ["hé"] }).data, [new TextEncoder().encode("hé")]);
    assert.throws(() => toTensor({ name: "x", data: [1, 2] }), /give its datatype/);
    assert.throws(() => toTensor({ name: "x", datatype: "FP32", data: Int32Array.of(1) }), /give a Float32Array, not a Int32Array/);
  });
});

describe("the gRPC client's messages", () => {
  const contents: ContentsMessage = { bool_contents: [], int_contents: [], int64_contents: [], uint_contents: [], uint64_contents: [], fp32_contents: [], fp64_contents: [], bytes_contents: [] };
  const output = (name: string, datatype: string, shape: string[], typed: Partial<ContentsMessage> | null) => ({ name, datatype, shape, parameters: {}, contents: typed === null ? null : { ...contents, ...typed } });

  test("outputs in typed contents, as servers that answer so send them, read as typed arrays", () => {
    const response = inferResponse({
      model_name: "m",
      model_version: "",
      id: "",
      parameters: { note: { parameter_choice: "string_param", string_param: "hi" } },
      outputs: [output("y", "FP32", ["2"], { fp32_contents: [1.5, -2] }), output("n", "INT64", ["1"], { int64_contents: ["-9007199254740993"] }), output("s", "BYTES", ["1"], { bytes_contents: [new TextEncoder().encode("ok")] }), output("b", "BOOL", ["2"], { bool_contents: [true, false] })],
      raw_output_contents: [],
    });
    assert.deepEqual(response, {
      model_name: "m",
      parameters: { note: "hi" },
      outputs: [
        { name: "y", datatype: "FP32", shape: [2], data: Float32Array.of(1.5, -2) },
        { name: "n", datatype: "INT64", shape: [1], data: BigInt64Array.of(-9007199254740993n) },
        { name: "s", datatype: "BYTES", shape: [1], data: [new TextEncoder().encode("ok")] },
        { name: "b", datatype: "BOOL", shape: [2], data: Uint8Array.of(1, 0) },
      ],
    });
  });

  test("outputs in raw contents; a response that does not fit its outputs is a ProtocolError", () => {
    const raw = new Uint8Array(Float32Array.of(4, 5).buffer);
    const response = inferResponse({ model_name: "m", model_version: "1", id: "r", parameters: {}, outputs: [output("y", "FP32", ["2"], null)], raw_output_contents: [raw] });
    assert.deepEqual(response.outputs[0]!.data, Float32Array.of(4, 5));
    assert.equal(response.model_version, "1");
    assert.throws(() => inferResponse({ model_name: "m", model_version: "", id: "", parameters: {}, outputs: [output("y", "FP32", ["3"], null)], raw_output_contents: [raw] }), ProtocolError);
    assert.throws(() => inferResponse({ model_name: "m", model_version: "", id: "", parameters: {}, outputs: [output("y", "FP99", ["1"], null)], raw_output_contents: [raw] }), ProtocolError);
  });

  test("inputs go as raw contents viewing the typed arrays' bytes", () => {
    const data = Float32Array.of(1, 2);
    const message = inferRequestMessage("m", "", { id: "q", parameters: { k: 3 }, inputs: [{ name: "x", datatype: "FP32", shape: [2], data }], outputs: [{ name: "y" }] });
    assert.equal(message.raw_input_contents[0]!.buffer, data.buffer);
    assert.deepEqual(message.parameters, { k: { int64_param: "3" } });
    assert.deepEqual(message.outputs, [{ name: "y", parameters: {} }]);
  });
});

describe("the client in a browser", () => {
  test("shoal/client bundles for the browser platform: nothing it imports needs Node.js", async () => {
    const result = await build({ entryPoints: [join(ROOT, "src", "client", "index.ts")], bundle: true, platform: "browser", format: "esm", write: false, logLevel: "silent" });
    assert.deepEqual(result.errors, []);
    const code = result.outputFiles[0]!.text;
    assert.match(code, /\/v2\/health\/live/);
    assert.doesNotMatch(code, /from "node:|require\("node:/);
  });
});
