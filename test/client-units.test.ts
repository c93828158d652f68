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

describe("the client in a browser", () => {
  test("shoal/client bundles for the browser platform: nothing it imports needs Node.js", async () => {
    const result = await build({ entryPoints: [join(ROOT, "src", "client", "index.ts")], bundle: true, platform: "browser", format: "esm", write: false, logLevel: "silent" });
    assert.deepEqual(result.errors, []);
    const code = result.outputFiles[0]!.text;
    assert.match(code, /\/v2\/health\/live/);
    assert.doesNotMatch(code, /from "node:|require\("node:/);
  });
});
