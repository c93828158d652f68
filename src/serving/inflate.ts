import * as zlib from "node:zlib";
import { Decompress } from "fzstd";

type Inflater = (bytes: Uint8Array, options: { maxOutputLength: number; chunkSize: number }, done: (err: Error | null, out: Buffer) => void) => void;

/** How a request's bytes are inflated, by encoding name (lower case): HTTP's `Content-Encoding`, gRPC's `grpc-encoding`. */
const INFLATERS: Record<string, Inflater> = {
  gzip: zlib.gunzip,
  "x-gzip": zlib.gunzip,
  deflate: zlib.inflate,
  zstd: zstdInflater(),
};

// zstd bodies (Mosec's clients send them): node:zlib's decoder where it has one (Node.js 22.15
// and later, Bun), else fzstd's, in JavaScript on this thread (Node.js 20), which stops as soon
// as the output passes the limit, as zlib's does.
function zstdInflater(): Inflater {
  const native = (zlib as unknown as { zstdDecompress?: Inflater }).zstdDecompress;
  if (native !== undefined) return native;
  return (bytes, { maxOutputLength }, done) => {
    const parts: Uint8Array[] = [];
    let size = 0;
    let result: [Error | null, Buffer];
    try {
      new Decompress((chunk) => {
        size += chunk.byteLength;
        if (size > maxOutputLength) throw Object.assign(new Error(`Cannot create a Buffer larger than ${maxOutputLength} bytes`), { code: "ERR_BUFFER_TOO_LARGE" });
        parts.push(chunk);
      }).push(bytes, true);
      result = [null, Buffer.concat(parts, size)];
    } catch (err) {
      result = [err instanceof Error ? err : new Error(String(err)), Buffer.alloc(0)];
    }
    // Answered later, as zlib answers.
    setImmediate(() => done(...result));
  };
}

// Each step on libuv's thread pool fills one output chunk and costs the event loop a callback
// and a buffer: zlib's default 16 KiB chunk made a 4 KiB gzip body that inflates to a 1 MiB limit
// 64 steps (1.2 ms of the event loop's time, measured alone). A chunk 64 times the compressed
// size, within these bounds, makes it 4 and leaves a small body a small chunk.
const MIN_CHUNK = zlib.constants.Z_DEFAULT_CHUNK;
const MAX_CHUNK = 256 * 1024;
const CHUNKS_PER_BYTE = 64;

// The smallest gzip member: a 10-byte header, an empty deflate block, CRC-32 and ISIZE.
const GZIP_MIN = 20;

/**
 * Whether a gzip body says it inflates past `limit`: its last 4 bytes (the last member's ISIZE,
 * its inflated size modulo 2^32) above the limit mean its members inflate to more, or that it is
 * not valid gzip (RFC 1952 has nothing after the last member's ISIZE); either way it is refused,
 * and here without being inflated: a bomb costs no thread-pool work and no output buffers. A
 * trailer that says less proves nothing (it may be forged, or wrapped modulo 2^32): such a body
 * is inflated, within the limit.
 */
function gzipSizeOver(bytes: Uint8Array, limit: number): boolean {
  if (bytes.byteLength < GZIP_MIN || bytes[0] !== 0x1f || bytes[1] !== 0x8b) return false;
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(bytes.byteLength - 4, true) > limit;
}

/** Whether requests compressed in `encoding` (lower case) can be inflated. */
export function inflatable(encoding: string): boolean {
  return Object.hasOwn(INFLATERS, encoding);
}

/** Why inflating failed: past the limit, or not valid in its encoding (zlib's message). */
export type InflateFailure = { tooLarge: true } | { tooLarge: false; message: string };

/**
 * Inflates `bytes`, compressed in `encoding` (one {@link inflatable} accepts), off the event loop,
 * stopping as soon as the output passes `limit` bytes, so that a small body that inflates to
 * gigabytes costs no more than the limit.
 */
export function inflate(encoding: string, bytes: Uint8Array, limit: number, done: (out: Buffer | undefined, failure?: InflateFailure) => void): void {
  if (encoding !== "deflate" && encoding !== "zstd" && gzipSizeOver(bytes, limit)) {
    done(undefined, { tooLarge: true });
    return;
  }
  const chunkSize = Math.min(MAX_CHUNK, Math.max(MIN_CHUNK, bytes.byteLength * CHUNKS_PER_BYTE));
  INFLATERS[encoding]!(bytes, { maxOutputLength: limit, chunkSize }, (err, out) => {
    if (err === null) done(out);
    else done(undefined, (err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE" ? { tooLarge: true } : { tooLarge: false, message: err.message });
  });
}
