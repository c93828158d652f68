import type { IncomingMessage } from "node:http";

/** A request body as read: the bytes, and the buffer that moves to a worker without a copy. */
export interface Body {
  bytes: Uint8Array;
  transfer: ArrayBuffer[] | undefined;
}

// Past the limit, the rest of a body is read and dropped, up to this many more bytes (or the limit,
// if larger) and for this long, before the 413 is sent anyway and the connection closed.
const DISCARD_BYTES = 1024 * 1024;
const DISCARD_MS = 2000;

/**
 * Reads a request body of at most `limit` bytes. A body over the limit is never buffered: once it
 * is known to be too large (from `content-length` or while streaming), the rest is dropped as it
 * arrives, and `tooLarge` is called when the body ends. Answering earlier would close the
 * connection under a client still sending, and many clients would then see a reset instead of the
 * 413. A body too large to wait for (past the bounds above) gets `tooLarge(true)`: answer it and
 * close the connection.
 */
export function readBody(req: IncomingMessage, limit: number, done: (body: Body) => void, tooLarge: (close: boolean) => void): void {
  const declared = req.headers["content-length"] === undefined ? -1 : Number(req.headers["content-length"]);
  const spare = Math.max(limit, DISCARD_BYTES);
  if (declared > limit + spare) {
    tooLarge(true);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Set once the body is known to be too large: from then on it is dropped, within the bounds.
  let timer: NodeJS.Timeout | undefined;
  const stop = () => clearTimeout(timer);
  const refuse = (close: boolean) => {
    stop();
    req.removeListener("data", onData);
    req.removeListener("end", onEnd);
    req.removeListener("close", stop);
    tooLarge(close);
  };
  const discard = () => {
    timer = setTimeout(() => refuse(true), DISCARD_MS);
    req.on("close", stop);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (timer !== undefined) {
      if (size > limit + spare) refuse(true);
    } else if (size > limit) {
      chunks.length = 0;
      discard();
    } else chunks.push(chunk);
  };
  const onEnd = () => (timer === undefined ? done(assemble(chunks, size)) : refuse(false));
  if (declared > limit) discard();
  req.on("data", onData);
  req.on("end", onEnd);
}

// The body gets an ArrayBuffer of its own, exactly its size, which then moves to the worker. A
// socket chunk is a view into a larger shared buffer, and structured clone would copy all of it.
function assemble(chunks: Buffer[], size: number): Body {
  const own = new Uint8Array(new ArrayBuffer(size));
  let at = 0;
  for (const chunk of chunks) {
    own.set(chunk, at);
    at += chunk.length;
  }
  return { bytes: own, transfer: size > 0 ? [own.buffer as ArrayBuffer] : undefined };
}
