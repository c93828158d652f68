/** The process-worker wire protocol: the test vectors and docs/protocol.md, byte for byte, and the framer. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { ERRORS } from "../src/errors.js";
import { FLAG, FrameDecoder, HEADER_BYTES, KIND, MAX_FRAME_BYTES, OFFSET, PROTOCOL_VERSION, ProtocolError, SIZE, decodeFrame, encodeFrame, type WireMessage } from "../src/workers/wire.js";

interface Vector {
  name: string;
  header: { length: number; version: number; kind: number; flags: number; seq: number };
  message: unknown;
  hex: string;
}

const file = JSON.parse(readFileSync(new URL("vectors/protocol.json", import.meta.url), "utf8")) as { vectors: Vector[] };

// The file's notation: {"$bytes": hex} is a Uint8Array, {"$float32": [...]} a Float32Array.
function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value === null || typeof value !== "object") return value;
  const fields = value as Record<string, unknown>;
  if (typeof fields.$bytes === "string") return new Uint8Array(Buffer.from(fields.$bytes, "hex"));
  if (Array.isArray(fields.$float32)) return Float32Array.from(fields.$float32 as number[]);
  return Object.fromEntries(Object.entries(fields).map(([key, v]) => [key, revive(v)]));
}

const vectors = file.vectors.map((v) => ({ ...v, message: revive(v.message) as WireMessage, bytes: new Uint8Array(Buffer.from(v.hex, "hex")) }));
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

// Frames with a header field changed, for the failure cases.
function withHeader(bytes: Uint8Array, at: number, value: number, size: 1 | 2 | 4): Uint8Array {
  const copy = Uint8Array.from(bytes);
  const view = new DataView(copy.buffer);
  if (size === 1) view.setUint8(at, value);
  else if (size === 2) view.setUint16(at, value, true);
  else view.setUint32(at, value, true);
  return copy;
}

describe("protocol test vectors", () => {
  test("cover every message kind", () => {
    assert.deepEqual(new Set(vectors.map((v) => v.message.kind)), new Set(Object.keys(KIND)));
  });

  for (const v of vectors) {
    test(`${v.name}: the header fields are where docs/protocol.md says`, () => {
      const view = new DataView(v.bytes.buffer);
      assert.equal(SIZE.length + SIZE.version + SIZE.kind + SIZE.flags + SIZE.seq, HEADER_BYTES);
      assert.deepEqual(
        {
          length: view.getUint32(OFFSET.length, true),
          version: view.getUint8(OFFSET.version),
          kind: view.getUint8(OFFSET.kind),
          flags: view.getUint16(OFFSET.flags, true),
          seq: view.getUint32(OFFSET.seq, true),
        },
        v.header,
      );
      assert.equal(v.header.length, v.bytes.byteLength);
      assert.equal(v.header.version, PROTOCOL_VERSION);
      assert.equal(v.header.kind, KIND[v.message.kind]);
    });

    test(`${v.name}: decodes to its message`, () => {
      assert.deepEqual(decodeFrame(v.bytes), v.message);
    });

    test(`${v.name}: encodes to its bytes`, () => {
      assert.equal(hex(encodeFrame(v.message)), v.hex);
    });
  }

  test("request and response bytes are msgpack bin, and typed arrays keep their type", () => {
    const batch = vectors.find((v) => v.name === "batch-request-bytes")!;
    // bin 8 (0xc4), 7 bytes, then the JSON body itself.
    assert.ok(batch.hex.includes(`c407${hex(Buffer.from('{"x":1}'))}`));
    const values = decodeFrame(vectors.find((v) => v.name === "batch-stage-values")!.bytes);
    assert.ok(values.kind === "batch");
    assert.ok(values.items[0]!.payload instanceof Float32Array);
    // Each decoded array has a buffer of its own, so it can move to a thread.
    const own = values.items[0]!.payload as Float32Array;
    assert.equal(own.buffer.byteLength, own.byteLength);
  });

  test("a Uint8Array inside a value comes back a Uint8Array", () => {
    const message: WireMessage = { kind: "result", seq: 9, results: [{ ok: true, value: { image: new Uint8Array([1, 2, 3]), ids: new Int32Array([-1, 7]) } }] };
    assert.deepEqual(decodeFrame(encodeFrame(message)), message);
  });

  test("the ERROR flag is set exactly when a result fails as a whole", () => {
    for (const v of vectors) assert.equal((v.header.flags & FLAG.ERROR) !== 0, (v.message.kind === "result" || v.message.kind === "stream") && v.message.error !== undefined, v.name);
  });

  test("a model host's boot holds only what every worker is told", () => {
    const boot: WireMessage = { kind: "boot", host: true, workerId: 2, num: 3, limits: { maxTensorElements: 10, maxBytesElements: 5 } };
    assert.deepEqual(decodeFrame(encodeFrame(boot)), boot);
    assert.throws(() => decodeFrame(encodeFrame({ kind: "boot", host: true } as WireMessage)), /boot frame: 'workerId' must be a number/);
  });

  test("sequence numbers wrap at 2^32 on the wire", () => {
    const frame = encodeFrame({ kind: "batch", seq: 2 ** 32 + 5, items: [] });
    assert.equal(new DataView(frame.buffer, frame.byteOffset).getUint32(OFFSET.seq, true), 5);
  });

  test("frames that break the protocol are refused with a reason", () => {
    const ready = vectors.find((v) => v.name === "ready")!.bytes;
    const cases: [Uint8Array, RegExp][] = [
      [withHeader(ready, OFFSET.version, 2, 1), /protocol version 2; this end speaks version 1/],
      [withHeader(ready, OFFSET.kind, 0x7f, 1), /unknown message kind 0x7f/],
      [withHeader(ready, OFFSET.length, ready.byteLength + 1, 4), /length field says/],
      [ready.subarray(0, HEADER_BYTES - 1), /shorter than its header/],
      // A map of one entry whose key, a string of 5 bytes, has only 1.
      [withHeader(Uint8Array.from([...ready.subarray(0, HEADER_BYTES), 0x81, 0xa5, 0x61]), OFFSET.length, HEADER_BYTES + 3, 4), /not MessagePack/],
    ];
    for (const [frame, reason] of cases) {
      assert.throws(() => decodeFrame(frame), (err: Error) => err instanceof ProtocolError && reason.test(err.message));
    }
    // A body that is MessagePack but not the message's shape.
    const bad = encodeFrame({ kind: "log", level: "info", msg: "x" });
    bad.writeUInt8(KIND.result, OFFSET.kind);
    assert.throws(() => decodeFrame(bad), /result frame: results must be an array/);
    const level = encodeFrame({ kind: "log", level: "loud" as "info", msg: "x" });
    assert.throws(() => decodeFrame(level), /level must be one of debug, info, warn, error/);
    for (const result of [{ ok: true, value: ["a"], fanOut: false }, { ok: true, value: "a", fanOut: true }]) {
      const frame = encodeFrame({ kind: "result", seq: 1, results: [result as never] });
      assert.throws(() => decodeFrame(frame), /result frame: a result: 'fanOut' must be true, with an array 'value'/);
    }
    for (const retries of [-1, 1.5, "2"]) {
      const frame = encodeFrame({ kind: "result", seq: 1, results: [], retries: retries as number });
      assert.throws(() => decodeFrame(frame), /result frame: 'retries' must be a count/);
    }
  });
});

describe("frame decoder", () => {
  const stream = Buffer.concat(vectors.map((v) => v.bytes));
  const expected = vectors.map((v) => v.message);

  function feed(chunks: Uint8Array[]): WireMessage[] {
    const decoder = new FrameDecoder();
    return chunks.flatMap((chunk) => decoder.push(chunk));
  }

  test("takes frames joined in one chunk", () => {
    assert.deepEqual(feed([stream]), expected);
  });

  test("takes frames one byte at a time, the length field split too", () => {
    assert.deepEqual(
      feed(Array.from(stream, (byte) => Uint8Array.of(byte))),
      expected,
    );
  });

  test("takes frames cut at random points", () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 50; round++) {
      const chunks: Uint8Array[] = [];
      for (let at = 0; at < stream.byteLength; ) {
        const size = 1 + Math.floor(random() * 64);
        chunks.push(stream.subarray(at, at + size));
        at += size;
      }
      assert.deepEqual(feed(chunks), expected, `round ${round}`);
    }
  });

  test("assembles a 16 MB frame from 1 KB chunks in time proportional to its size", () => {
    const payload = new Uint8Array(16 * 1024 * 1024).map((_, i) => i % 251);
    const frame = encodeFrame({ kind: "result", seq: 1, results: [{ ok: true, value: payload }] });
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < frame.byteLength; at += 1024) chunks.push(frame.subarray(at, at + 1024));
    const start = performance.now();
    const [message] = feed(chunks);
    const ms = performance.now() - start;
    assert.ok(message?.kind === "result" && message.results?.[0]?.ok === true);
    assert.deepEqual(message.results[0].value, payload);
    // Copying each chunk into a growing buffer would move terabytes here; one copy takes milliseconds.
    assert.ok(ms < 2000, `took ${ms.toFixed(0)} ms`);
  });

  test("refuses a length outside the limits before waiting for the body", () => {
    const huge = new Uint8Array(SIZE.length);
    new DataView(huge.buffer).setUint32(0, MAX_FRAME_BYTES + 1, true);
    assert.throws(() => new FrameDecoder().push(huge), ProtocolError);
    assert.throws(() => new FrameDecoder().push(Uint8Array.of(3, 0, 0, 0)), /not between 12 and/);
  });
});

describe("docs/protocol.md", () => {
  const doc = readFileSync(new URL("../docs/protocol.md", import.meta.url), "utf8");

  test("the worked example shows the vectors' bytes", () => {
    const blocks = [...doc.matchAll(/<!-- vector: ([\w-]+) -->\n```text\n([\s\S]*?)```/g)];
    assert.deepEqual(
      blocks.map((b) => b[1]),
      ["batch-request-bytes", "result-response-bytes"],
    );
    for (const [, name, block] of blocks) {
      // Each line is bytes, two spaces or more, then what they mean.
      const bytes = block!.split("\n").filter((line) => line.length > 0).map((line) => line.split(/\s{2,}/)[0]!);
      for (const part of bytes) assert.match(part, /^[0-9a-f]{2}( [0-9a-f]{2})*$/, `${name}: ${part}`);
      assert.equal(bytes.join("").replaceAll(" ", ""), vectors.find((v) => v.name === name)!.hex, name!);
    }
  });

  test("the kind table gives every kind its code", () => {
    for (const [kind, code] of Object.entries(KIND)) assert.ok(doc.includes(`| \`0x${code.toString(16).padStart(2, "0")}\` | \`${kind}\` |`), kind);
  });

  test("the codes a worker sends have the status and prefix of the error table", () => {
    const rows = [...doc.matchAll(/^\| `([A-Z_]+)` \| (\d+) \| ([^|]+) \|/gm)];
    assert.ok(rows.length >= 6);
    for (const [, code, status, prefix] of rows) {
      const kind = (ERRORS as Record<string, { status: number; prefix: string }>)[code!];
      assert.deepEqual({ code, status: Number(status), prefix: prefix!.trim() }, { code, status: kind?.status, prefix: kind?.prefix });
    }
  });
});
