/**
 * Where the messages of a gRPC request stream end (src/grpc/message-frames.ts), however the
 * bytes are cut into chunks: what the byte budget's holds of arriving messages rest on. The
 * holding itself is tested on a real server in grpc.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MessageFrames } from "../src/grpc/message-frames.js";

// A gRPC message of `length` bytes with its prefix.
const message = (length: number, flag = 0) => {
  const bytes = Buffer.alloc(5 + length, 0xab);
  bytes[0] = flag;
  bytes.writeUInt32BE(length, 1);
  return bytes;
};

// The message sizes (prefix included) found in `stream` fed in chunks of `size` bytes.
function ends(stream: Buffer, size: number): number[] {
  const frames = new MessageFrames();
  const found: number[] = [];
  let current = 0;
  for (let at = 0; at < stream.length; at += size) {
    const chunk = stream.subarray(at, at + size);
    const pieces = frames.split(chunk);
    assert.equal(pieces.reduce((sum, p) => sum + p.bytes, 0), chunk.length, "the pieces cover the chunk");
    for (const piece of pieces) {
      current += piece.bytes;
      if (piece.ends) {
        found.push(current);
        current = 0;
      }
    }
  }
  if (current > 0) found.push(-current);
  return found;
}

test("one message in one chunk, and messages of every size in chunks of every size", () => {
  assert.deepEqual(ends(message(10), 100), [15]);
  const stream = Buffer.concat([message(0), message(1), message(300), message(4), message(70_000, 1), message(0)]);
  for (const size of [1, 2, 3, 4, 5, 6, 7, 64, 1000, 16_384, stream.length]) {
    assert.deepEqual(ends(stream, size), [5, 6, 305, 9, 70_005, 5], `chunks of ${size} bytes`);
  }
});

test("a message still arriving ends no piece; its bytes so far are counted", () => {
  assert.deepEqual(ends(message(100).subarray(0, 50), 16), [-50]);
  assert.deepEqual(ends(message(100).subarray(0, 3), 1), [-3]);
});

test("a length with its top bit set is read as the large number it is, not a negative one", () => {
  const frames = new MessageFrames();
  const prefix = Buffer.from([0, 0x80, 0, 0, 0]);
  assert.deepEqual(frames.split(Buffer.concat([prefix, Buffer.alloc(10)])), [{ bytes: 15, ends: false }]);
});
