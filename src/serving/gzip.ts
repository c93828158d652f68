import * as zlib from "node:zlib";

/** Answers smaller than this go as they are: compressing them costs more than it saves. */
export const MIN_COMPRESSED_BYTES = 1024;

/** A compressor of answers. */
export type Compress = (body: Uint8Array, done: (err: Error | null, out: Buffer) => void) => void;

/** gzip as answers are compressed with it, over HTTP and gRPC. */
export const gzip: Compress = (body, done) => zlib.gzip(body, { level: 6 }, done);

