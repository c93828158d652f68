import * as zlib from "node:zlib";

/** How a request's bytes are inflated, by encoding name (lower case): HTTP's `Content-Encoding`, gRPC's `grpc-encoding`. */
const INFLATERS: Record<string, typeof zlib.gunzip> = {
  gzip: zlib.gunzip,
  "x-gzip": zlib.gunzip,
  deflate: zlib.inflate,
};

// Each step on libuv's thread pool fills one output chunk and costs the event loop a callback
// and a buffer: zlib's default 16 KiB chunk made a 4 KiB gzip body that inflates to a 1 MiB limit
// 64 steps (1.2 ms of the event loop's time). A chunk 64 times the compressed size, within these
// bounds, makes it 4 and leaves a small body a small chunk.
const MIN_CHUNK = zlib.constants.Z_DEFAULT_CHUNK;
const MAX_CHUNK = 256 * 1024;
const CHUNKS_PER_BYTE = 64;

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
  const chunkSize = Math.min(MAX_CHUNK, Math.max(MIN_CHUNK, bytes.byteLength * CHUNKS_PER_BYTE));
  INFLATERS[encoding]!(bytes, { maxOutputLength: limit, chunkSize }, (err, out) => {
    if (err === null) done(out);
    else done(undefined, (err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE" ? { tooLarge: true } : { tooLarge: false, message: err.message });
  });
}
