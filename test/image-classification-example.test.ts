/**
 * examples/image-classification/server.ts: EfficientNet-Lite0 (npm run models) behind a CPU stage
 * that decodes images with sharp and a batched ONNX stage, and as the V2 model
 * `efficientnet-lite0`; bad images are refused quickly, without a worker's crash or a gigabyte.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { deflateSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import sharp from "sharp";
import { Client, outputOf, textOf } from "shoal/client";
import { assertError, send, startServer, type ServerProcess } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

const CAT = readFileSync(createRequire(import.meta.url).resolve("deeplearn-squeezenet/cat.jpg"));

// A PNG chunk: length, type, data, CRC-32 of type and data.
function chunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  let crc = 0xffffffff;
  for (const byte of body) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1;
  }
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const sum = Buffer.alloc(4);
  sum.writeUInt32BE((crc ^ 0xffffffff) >>> 0);
  return Buffer.concat([length, body, sum]);
}

/** A valid PNG header declaring an RGB image of `side` × `side` pixels, with 100 bytes of data. */
function declaredPng(side: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(side, 0);
  ihdr.writeUInt32BE(side, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.alloc(100))), chunk("IEND", Buffer.alloc(0))]);
}

/** The test JPEG with its frame header saying `side` × `side` pixels. */
function declaredJpeg(side: number): Buffer {
  const jpeg = Buffer.from(CAT);
  const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
  assert.ok(sof > 0, "cat.jpg has a baseline frame header");
  jpeg.writeUInt16BE(side, sof + 5);
  jpeg.writeUInt16BE(side, sof + 7);
  return jpeg;
}

/** The server's peak resident memory so far, in bytes (Linux). */
function peakMemory(pid: number): number {
  const kb = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmHWM:\s+(\d+) kB$/m)![1]!;
  return Number(kb) * 1024;
}

const classify = (url: string, body: Uint8Array, headers: Record<string, string> = {}) => send(url, { method: "POST", body, headers });

describe("examples/image-classification/server.ts", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer("examples/image-classification/server.ts", { startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  test("the test image is a tabby cat, top of 5 by default, k of them with ?k=", async () => {
    const reply = await classify(`${server.url}/classify`, CAT, { "content-type": "image/jpeg" });
    assert.equal(reply.status, 200, reply.text);
    const top = reply.json.top as { label: string; score: number }[];
    assert.equal(top.length, 5);
    assert.equal(top[0]!.label, "tabby, tabby cat");
    assert.ok(top[0]!.score > 0.5 && top[0]!.score < 1, `${top[0]!.score}`);
    assert.deepEqual(top.slice(0, 3).map((g) => g.label), ["tabby, tabby cat", "Egyptian cat", "tiger cat"]);
    for (let i = 1; i < top.length; i++) assert.ok(top[i]!.score <= top[i - 1]!.score, "most likely first");
    const three = await classify(`${server.url}/classify?k=3`, CAT);
    assert.deepEqual(three.json.top, top.slice(0, 3), "sniffed without a content-type, the same answer");
  });

  test("a PNG is read as well, and concurrent images are classified in batches", async () => {
    const png = await sharp(CAT).png().toBuffer();
    const before = await batchSizes(server.url, "Classifier_2");
    const replies = await Promise.all(Array.from({ length: 16 }, (_, i) => classify(`${server.url}/classify?k=1`, i % 2 ? png : CAT, i % 2 ? { "content-type": "image/png" } : {})));
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.top[0].label, "tabby, tabby cat");
    }
    const after = await batchSizes(server.url, "Classifier_2");
    assert.equal(after.items - before.items, 16);
    assert.ok(after.batches - before.batches < 16, `16 images took ${after.batches - before.batches} batches`);
    // Grey with an alpha channel (two channels) is turned into RGB first: still a cat.
    const grey = await sharp(CAT).toColourspace("b-w").ensureAlpha().png().toBuffer();
    assert.equal((await sharp(grey).metadata()).channels, 2);
    const reply = await classify(`${server.url}/classify?k=1`, grey);
    assert.equal(reply.status, 200, reply.text);
    assert.match(reply.json.top[0].label, /cat/);
  });

  test("bad images and bad k are 422s, answered quickly, and the workers live on", async () => {
    const started = performance.now();
    const cases: [Uint8Array, Record<string, string>, string, RegExp | string][] = [
      // (libvips keeps one error message for all threads, so the reason after the colon may be
      // another worker's, or "Unknown error", when two fail at once.)
      [CAT.subarray(0, 5000), {}, "", /^request validation error: the body is not a readable JPEG image: /],
      [Buffer.from("hello, not an image"), {}, "", "request validation error: the body is not a JPEG or PNG image"],
      [declaredPng(20_000), {}, "", "request validation error: the image is 20000 × 20000 pixels, more than 25000000"],
      [declaredJpeg(20_000), {}, "", "request validation error: the image is 20000 × 20000 pixels, more than 25000000"],
      [declaredPng(4000), {}, "", /^request validation error: the body is not a readable PNG image: /],
      [CAT, { "content-type": "image/png" }, "", "request validation error: the body is a JPEG image, not image/png as its content-type says"],
      [CAT, { "content-type": "image/gif" }, "", "request validation error: image/gif is not classified; send a JPEG or PNG image"],
      [CAT, {}, "?k=0", "request validation error: k must be a whole number from 1 to 1000; got '0'"],
      [CAT, {}, "?k=2.5", "request validation error: k must be a whole number from 1 to 1000; got '2.5'"],
      [CAT, {}, "?k=1001", "request validation error: k must be a whole number from 1 to 1000; got '1001'"],
    ];
    const replies = await Promise.all(cases.map(([body, headers, query]) => classify(`${server.url}/classify${query}`, body, headers)));
    replies.forEach((reply, i) => assertError(reply, 422, cases[i]![3]));
    assert.ok(performance.now() - started < 5_000, `${cases.length} bad requests took ${Math.round(performance.now() - started)} ms`);
    // Nothing was decoded at the size the headers declared (20,000² RGB would be 1.2 GB).
    assert.ok(peakMemory(server.proc.pid!) < 1024 ** 3, `peak memory ${peakMemory(server.proc.pid!)} bytes`);
    const good = await classify(`${server.url}/classify?k=1`, CAT);
    assert.equal(good.status, 200, good.text);
    assert.doesNotMatch(server.stdout, /worker (died|exited)|"level":50/, "no worker crashed, nothing logged as the server's error");
  });

  test("the V2 model takes UINT8 RGB or normalised FP32 tensors", async () => {
    const rgb = await sharp(CAT).resize(256, 256, { fit: "cover" }).extract({ left: 16, top: 16, width: 224, height: 224 }).removeAlpha().raw().toBuffer();
    const client = new Client(server.url);
    const model = "efficientnet-lite0";
    const bytes = await client.v2.infer(model, { inputs: [{ name: "image", data: new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.byteLength), shape: [1, 224, 224, 3] }] });
    assert.deepEqual(bytes.outputs.map((o) => o.name), ["probs", "label"]);
    assert.deepEqual(outputOf(bytes, "probs").shape, [1, 1000]);
    assert.deepEqual(textOf(outputOf(bytes, "label")), ["tabby, tabby cat"]);
    // The same pixels normalised by the client, in binary tensor data: the same label.
    const mean = [0.485, 0.456, 0.406];
    const std = [0.229, 0.224, 0.225];
    const planar = new Float32Array(3 * 224 * 224);
    for (let i = 0; i < 224 * 224; i++) for (let c = 0; c < 3; c++) planar[c * 224 * 224 + i] = (rgb[i * 3 + c]! / 255 - mean[c]!) / std[c]!;
    const floats = await client.v2.infer(model, { inputs: [{ name: "image", data: planar, shape: [1, 3, 224, 224] }], outputs: ["label"] }, { binary: { inputs: true } });
    assert.deepEqual(floats.outputs.map((o) => [o.name, textOf(o)]), [["label", ["tabby, tabby cat"]]]);
    await assert.rejects(client.v2.infer(model, { inputs: [{ name: "image", data: new Float32Array(150528), shape: [1, 224, 224, 3] }] }), {
      name: "HttpError",
      status: 400,
      message: "bad request: input 'image' must be FP32 [N, 3, 224, 224] (normalised) or UINT8 [N, 224, 224, 3] (RGB); got FP32 [1, 224, 224, 3]",
    });
  });
});
