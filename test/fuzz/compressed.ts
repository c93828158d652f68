/**
 * Compressed request bodies for the fuzz: a request of another kind sent with `Content-Encoding`
 * gzip, deflate or zstd, truly compressed, compressed and then cut or corrupted, claimed but not
 * compressed, in an encoding the server does not take, or a zip bomb (a small body that inflates
 * past the body limit).
 */
import { deflateSync, gzipSync } from "node:zlib";
import { zstdFrame } from "../helpers.js";
import type { Random } from "./random.js";

/** A body, and the `Content-Encoding` it is sent with. */
export interface Encoded {
  body: Uint8Array;
  encoding: string;
}

// Made once: 64 MB of spaces, gzipped to about 64 KB; 64 MiB of spaces in zstd's RLE blocks, 2 KB.
let bomb: Uint8Array | undefined;
let zstdBomb: Uint8Array | undefined;

/** `body` as a client might send it compressed. */
export function compressBody(r: Random, body: Uint8Array): Encoded {
  const encoding = r.weighted<string>([[6, "gzip"], [3, "deflate"], [2, "zstd"], [1, r.pick(["br", "compress", "x-gzip", "GZIP", "gzip, deflate", "identity", ""])]]);
  const compress = (bytes: Uint8Array) => (encoding === "zstd" ? zstdFrame(Buffer.from(bytes)) : encoding.toLowerCase().includes("deflate") ? deflateSync(bytes) : gzipSync(bytes));
  return r.weighted<() => Encoded>([
    [10, () => ({ body: compress(body), encoding })],
    [2, () => {
      const whole = compress(body);
      return { body: whole.subarray(0, r.int(0, whole.length)), encoding };
    }],
    [2, () => {
      const corrupt = Buffer.from(compress(body));
      for (let i = 0; i < 4 && corrupt.length > 0; i++) corrupt[r.int(0, corrupt.length - 1)] = r.int(0, 255);
      return { body: corrupt, encoding };
    }],
    [1, () => ({ body, encoding })],
    [0.5, () => ({ body: (bomb ??= gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20))), encoding: "gzip" })],
    [0.3, () => ({ body: (zstdBomb ??= zstdFrame(Buffer.alloc(0), 512)), encoding: "zstd" })],
  ])();
}
