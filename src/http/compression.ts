/**
 * HTTP compression, as Triton does it: request bodies sent with `Content-Encoding: gzip`,
 * `deflate` or `zstd` are inflated, the body limit applying to the inflated bytes; answers large enough to
 * gain from it are compressed in an encoding the client's `Accept-Encoding` takes (gzip, br, and
 * zstd where node:zlib has it). zlib runs on libuv's thread pool, off the event loop.
 */
import * as zlib from "node:zlib";
import { ShoalError } from "../errors.js";
import type { Body } from "./body.js";
import { overBudget, type Hold } from "../serving/byte-budget.js";
import { inflatable, inflate } from "../serving/inflate.js";

import { gzip, MIN_COMPRESSED_BYTES, type Compress } from "../serving/gzip.js";

export { gzip, MIN_COMPRESSED_BYTES };

// The encodings answers may take, in the server's order of preference among equals. Brotli's
// default quality (11) is far too slow for answers; 4 compresses about as fast as gzip.
const ENCODINGS = new Map<string, Compress>([
  ["gzip", gzip],
  ["br", (body, done) => zlib.brotliCompress(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength } }, done)],
  ...zstd(),
  ["deflate", (body, done) => zlib.deflate(body, done)],
]);

// zstd only where node:zlib has it (Node.js 22.15 and later).
function zstd(): [string, Compress][] {
  const compress = (zlib as unknown as { zstdCompress?: (body: Uint8Array, done: (err: Error | null, out: Buffer) => void) => void }).zstdCompress;
  return compress === undefined ? [] : [["zstd", (body, done) => compress(body, done)]];
}

/**
 * The encoding to answer in for an `Accept-Encoding` header: the one the client weighs most
 * (`q`), the server's order breaking ties; undefined for none (identity).
 */
export function responseEncoding(accept: string | undefined): string | undefined {
  if (accept === undefined || accept === "") return undefined;
  let best: string | undefined;
  let bestQ = 0;
  let wildcard = -1;
  const weights = new Map<string, number>();
  for (const item of accept.split(",")) {
    const [token = "", ...params] = item.trim().toLowerCase().split(";");
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!Number.isFinite(weight)) continue;
    if (token === "*") wildcard = weight;
    else weights.set(token, weight);
  }
  for (const name of ENCODINGS.keys()) {
    const q = weights.get(name) ?? (wildcard >= 0 ? wildcard : 0);
    if (q > bestQ) [best, bestQ] = [name, q];
  }
  return best;
}

/** Compresses an answer's body in `encoding` (one {@link responseEncoding} gave); `out` undefined when it could not be. */
export function compress(encoding: string, body: Uint8Array, done: (out: Buffer | undefined) => void): void {
  ENCODINGS.get(encoding)!(body, (err, out) => done(err === null ? out : undefined));
}

/**
 * A request body as sent (`encoding`: its `Content-Encoding`), inflated within `limit` bytes:
 * inflating stops as soon as it passes the limit (413), so a small body that inflates to
 * gigabytes costs no more than the limit. The inflated bytes are held against the budget too
 * (429 when they do not fit). An encoding other than gzip, deflate, zstd or identity is a 415.
 */
export function decodeBody(encoding: string | undefined, body: Body, limit: number, hold: Hold, done: (body: Body | undefined, error?: ShoalError) => void): void {
  const name = encoding?.trim().toLowerCase();
  if (name === undefined || name === "" || name === "identity") {
    done(body);
    return;
  }
  if (!inflatable(name)) {
    done(undefined, new ShoalError("UNSUPPORTED_ENCODING", `Content-Encoding '${name.slice(0, 40)}'; use gzip, deflate or zstd`));
    return;
  }
  inflate(name, body.bytes, limit, (out, failure) => {
    if (out === undefined) {
      done(undefined, failure?.tooLarge !== false ? new ShoalError("BODY_TOO_LARGE", `the limit is ${limit} bytes, once inflated`) : new ShoalError("BAD_REQUEST", `the body is not valid ${name}: ${failure.message}`));
      return;
    }
    if (!hold.take(Math.max(0, out.byteLength - body.bytes.byteLength))) {
      done(undefined, overBudget());
      return;
    }
    // An ArrayBuffer of its own, to move to the worker: zlib's output may share a pooled one.
    const own = out.byteOffset === 0 && out.buffer.byteLength === out.byteLength ? new Uint8Array(out.buffer, 0, out.byteLength) : new Uint8Array(out);
    done({ bytes: own, transfer: own.byteLength > 0 ? [own.buffer as ArrayBuffer] : undefined });
  });
}
