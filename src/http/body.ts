import type { HttpRequest } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Hold } from "../serving/byte-budget.js";

/** A request body as read: the bytes, and the buffer that moves to a worker without a copy. */
export interface Body {
  bytes: Uint8Array;
  transfer: ArrayBuffer[] | undefined;
}

/** How to read one request body, and where its outcome goes. */
export interface BodyReading {
  /** Largest body in bytes; a larger one is refused with 413. */
  limit: number;
  /**
   * The request's share of the server's budget of body bytes: the body is held in it as its
   * bytes arrive (never by its declared length, which a slow client could hold without sending
   * it), and refused with 429 when it does not fit, at once when its declared length does not. Released here when the body is refused or
   * its client leaves; after `done`, by whoever takes the body.
   */
  hold?: Hold;
  /** The whole body. */
  done(body: Body): void;
  /** The body is refused: answer `error`, with `connection: close` when `close` is set. */
  refused(error: ShoalError, close: boolean): void;
  /** The client left before its body ended: there is no one to answer. */
  left?(): void;
}

/**
 * Emitted on a request, with the error to answer, when node:http gives up on its body (it did
 * not arrive within `--request-timeout`, or is malformed) or the server does (it is shutting
 * down): a reader still reading it refuses it with that error and `close` set.
 */
export const BODY_FAILED = Symbol("body failed");

/** How long and how much a closing connection goes on reading what its client still sends. */
export interface Linger {
  ms: number;
  bytes: number;
}

// Once a body is refused, the rest of it is read and dropped, up to this many more bytes (or the
// limit, if larger) and for this long, before the connection is closed.
const DISCARD_BYTES = 1024 * 1024;
const DISCARD_MS = 2000;

/**
 * How much of a refused body of at most `limit` bytes is read and dropped, and for how long,
 * before the connection is closed; also how long a closing connection reads what still comes.
 */
export function discardBounds(limit: number): Linger {
  return { ms: DISCARD_MS, bytes: Math.max(limit, DISCARD_BYTES) };
}

// node:http's own test for a request that waits for 100 Continue before sending its body.
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * Reads a request body of at most `limit` bytes, held against the budget when a hold is given.
 * A refused body is never kept: from the moment it is known to be refused (from
 * `content-length` or while streaming), the rest is read and dropped as it arrives.
 *
 * A body over the limit gets its 413 when it ends: answering earlier would make many clients
 * still sending close the connection and fail on their next write instead of reading the
 * answer. A body that does not fit the budget gets its 429 at once: the server is shedding load,
 * and a client told early can stop sending and retry later. Either way, a client that goes on
 * sending past the bounds above is cut off (with the 413 if it is still owed), and one that
 * declares a body too large to wait for is refused at once with `close` set.
 *
 * A client that sent `Expect: 100-continue` has not sent its body yet: the front sends it
 * 100 Continue only once the body is read, so a body it declares too large is refused at once.
 */
export function receiveBody(req: HttpRequest, reading: BodyReading): void {
  const { limit, hold } = reading;
  const declared = req.headers["content-length"] === undefined ? -1 : Number(req.headers["content-length"]);
  const spare = Math.max(limit, DISCARD_BYTES);
  if (declared > limit + spare || (declared > limit && CONTINUE.test(req.headers.expect ?? ""))) {
    reading.refused(tooLarge(limit), true);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Reading the body, dropping it after a refusal, or finished.
  let state: "reading" | "dropping" | "over" = "reading";
  let dropped = 0;
  // The answer to give when a refused body ends, unless it was given at once.
  let owed: ShoalError | undefined;
  let timer: NodeJS.Timeout | undefined;

  // The listeners stay on the request, which is dropped with them: once over, each returns at
  // once (taking four listeners off again cost more than the rest of the reading).
  const stop = () => {
    state = "over";
    clearTimeout(timer);
  };
  const refuse = (error: ShoalError, now: boolean) => {
    hold?.release();
    chunks.length = 0;
    state = "dropping";
    timer = setTimeout(cutOff, DISCARD_MS);
    if (now) reading.refused(error, false);
    else owed = error;
  };
  // Past the bounds: the answer still owed goes with `close`, or the connection is closed.
  const cutOff = () => {
    stop();
    if (owed !== undefined) reading.refused(owed, true);
    else req.socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    if (state === "over") return;
    if (state === "dropping") {
      dropped += chunk.length;
      if (dropped > spare) cutOff();
      return;
    }
    size += chunk.length;
    if (size > limit) refuse(tooLarge(limit), false);
    else if (hold !== undefined && !hold.take(chunk.length)) refuse(overBudget(), true);
    else chunks.push(chunk);
  };
  const onEnd = () => {
    if (state === "over") return;
    const whole = state === "reading";
    stop();
    if (!whole) {
      if (owed !== undefined) reading.refused(owed, false);
      return;
    }
    const body = assemble(chunks, size);
    // The socket's chunks are copied out: the listeners that outlive the reading must not keep them.
    chunks.length = 0;
    reading.done(body);
  };
  // The client left before the body ended.
  const onClose = () => {
    if (state === "over") return;
    stop();
    hold?.release();
    reading.left?.();
  };
  const onFailed = (error: ShoalError) => {
    if (state === "over") return;
    const answer = state === "reading" ? error : owed;
    stop();
    hold?.release();
    if (answer !== undefined) reading.refused(answer, true);
  };
  req.on("data", onData);
  req.on("end", onEnd);
  req.on("close", onClose);
  req.on(BODY_FAILED, onFailed);
  if (declared > limit) refuse(tooLarge(limit), false);
  else if (declared > 0 && hold !== undefined && !hold.fits(declared)) refuse(overBudget(), true);
}

/**
 * Reads a small body outside the budget (a control request's): {@link receiveBody} where only a
 * body over `limit` is the caller's to answer (`tooLarge`); the front answers a body node:http
 * gave up on.
 */
export function readBody(req: HttpRequest, limit: number, done: (body: Body) => void, tooLarge: (close: boolean) => void): void {
  const refused = (error: ShoalError, close: boolean) => {
    if (error.code === "BODY_TOO_LARGE") tooLarge(close);
  };
  receiveBody(req, { limit, done, refused });
}

function tooLarge(limit: number): ShoalError {
  return new ShoalError("BODY_TOO_LARGE", `the limit is ${limit} bytes`);
}

function overBudget(): ShoalError {
  return new ShoalError("QUEUE_FULL", "the request bodies in flight leave no room for this one; retry later");
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
