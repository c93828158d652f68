import type { IncomingMessage } from "node:http";

/** A request body as read: the bytes, and the buffer that moves to a worker without a copy. */
export interface Body {
  bytes: Uint8Array;
  transfer: ArrayBuffer[] | undefined;
}

/**
 * Reads a request body of at most `limit` bytes. Calls `tooLarge` instead of `done` as soon as the
 * body is known to be over the limit (from `content-length` or while streaming) and stops
 * collecting, so an oversized body is never buffered.
 */
export function readBody(req: IncomingMessage, limit: number, done: (body: Body) => void, tooLarge: () => void): void {
  const declared = req.headers["content-length"] === undefined ? -1 : Number(req.headers["content-length"]);
  if (declared > limit) {
    tooLarge();
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) {
      req.removeListener("data", onData);
      req.removeListener("end", onEnd);
      tooLarge();
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = () => done(assemble(chunks, size));
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
