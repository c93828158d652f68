/** Codecs other than JSON: MessagePack and raw bytes. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { pack, unpack } from "msgpackr";
import { assertError, fixture, post, startServer, type ServerProcess } from "./helpers.js";

describe("codecs", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("codecs.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("a msgpack worker decodes MessagePack and answers application/msgpack", async () => {
    const blob = new Uint8Array([1, 2, 3, 250]);
    const reply = await post(`${server.url}/msgpack`, new Uint8Array(pack({ tag: "t1", values: [1, 2, 3.5], blob })), { "content-type": "application/msgpack" });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/msgpack");
    assert.equal(Number(reply.headers.get("content-length")), reply.body.byteLength);
    const answer = unpack(reply.body) as Record<string, unknown>;
    assert.equal(answer.tag, "t1");
    assert.equal(answer.sum, 6.5);
    assert.ok(answer.reversed instanceof Uint8Array, "binary comes back as binary");
    assert.deepEqual([...(answer.reversed as Uint8Array)], [250, 3, 2, 1]);
  });

  test("msgpack errors are still JSON error bodies", async () => {
    const invalid = await post(`${server.url}/msgpack`, new Uint8Array(pack({ tag: "t2", blob: "not binary" })));
    assertError(invalid, 422, "request validation error: 'blob' must be binary");
    // An array of two elements that ends after the first.
    const garbage = await post(`${server.url}/msgpack`, new Uint8Array([0x92, 0x01]));
    assertError(garbage, 400, /^decoding error: /);
  });

  test("a bytes worker receives the raw body and its bytes are sent back as they are", async () => {
    const body = new Uint8Array(randomBytes(64 * 1024));
    const reply = await post(`${server.url}/bytes`, body, { "content-type": "application/octet-stream" });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/octet-stream");
    assert.equal(reply.body.byteLength, body.byteLength);
    assert.deepEqual(Buffer.from(reply.body), Buffer.from(body).reverse());
  });

  test("bytes that are not valid JSON or UTF-8 pass through untouched", async () => {
    const body = new Uint8Array([0xff, 0x00, 0xfe, 0x7b]);
    const reply = await post(`${server.url}/bytes`, body);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual([...reply.body], [0x7b, 0xfe, 0x00, 0xff]);
  });

  test("a bytes worker may answer a string, sent as UTF-8", async () => {
    const reply = await post(`${server.url}/hex`, new Uint8Array([0xde, 0xad]));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/octet-stream");
    assert.equal(reply.text, "dead ✓");
  });
});
