/**
 * Inflating a request's bytes within a limit (src/serving/inflate.ts), which both doors use: the
 * limit is exact, a bomb stops at it, and a body that is not valid says why.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deflateSync, gzipSync } from "node:zlib";
import { inflatable, inflate, type InflateFailure } from "../src/serving/inflate.js";

function inflated(encoding: string, bytes: Uint8Array, limit: number): Promise<{ out?: Buffer; failure?: InflateFailure }> {
  return new Promise((resolve) => inflate(encoding, bytes, limit, (out, failure) => resolve({ out, failure })));
}

describe("inflate", () => {
  test("the encodings it takes, and no others (nor the names of an object's own properties)", () => {
    assert.deepEqual(["gzip", "x-gzip", "deflate", "br", "zstd", "identity", "constructor", "toString"].map(inflatable), [true, true, true, false, true, false, false, false]);
  });

  test("output of exactly the limit is given whole; one byte more is too large", async () => {
    const limit = 300_000;
    const exact = Buffer.alloc(limit, 7);
    const { out } = await inflated("gzip", gzipSync(exact), limit);
    assert.ok(out !== undefined && out.equals(exact));
    assert.deepEqual(await inflated("gzip", gzipSync(Buffer.alloc(limit + 1)), limit), { out: undefined, failure: { tooLarge: true } });
  });

  test("a small body that inflates to gigabytes is too large, and deflate bodies are inflated as gzip ones", async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    assert.ok(bomb.byteLength < 128 * 1024);
    assert.deepEqual(await inflated("gzip", bomb, 1024 * 1024), { out: undefined, failure: { tooLarge: true } });
    const text = Buffer.from("a body ".repeat(1000));
    assert.ok((await inflated("deflate", deflateSync(text), 1024 * 1024)).out?.equals(text));
  });

  test("a gzip body whose trailer says it inflates past the limit is refused at once, without being inflated; a forged trailer only makes it inflate to the limit", async () => {
    const bomb = gzipSync(Buffer.alloc(4 * 1024 * 1024), { level: 9 });
    let answer: InflateFailure | undefined;
    inflate("gzip", bomb, 1024 * 1024, (_out, failure) => (answer = failure));
    assert.deepEqual(answer, { tooLarge: true }, "answered before inflate returned: no thread-pool work");
    const forged = Buffer.from(bomb);
    forged.writeUInt32LE(100, forged.byteLength - 4);
    let early = false;
    const later = new Promise<InflateFailure | undefined>((resolve) =>
      inflate("x-gzip", forged, 1024 * 1024, (_out, failure) => {
        resolve(failure);
        early = true;
      }),
    );
    assert.equal(early, false, "a trailer under the limit is inflated");
    assert.deepEqual(await later, { tooLarge: true });
    const small = Buffer.from("within ".repeat(100));
    assert.ok((await inflated("gzip", gzipSync(small), small.byteLength)).out?.equals(small));
  });

  test("bytes that are not valid in their encoding fail with zlib's reason", async () => {
    const { out, failure } = await inflated("gzip", Buffer.from("not gzip at all"), 1024);
    assert.equal(out, undefined);
    assert.equal(failure?.tooLarge, false);
    assert.match(failure?.tooLarge === false ? failure.message : "", /header/);
  });
});
