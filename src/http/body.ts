import type { HttpRequest } from "./http-message.js";
import { ShoalError } from "../errors.js";
import { overBudget, type Hold } from "../serving/byte-budget.js";

/** A request body as read: the bytes, and the buffer that moves to a worker without a copy. */
export interface Body {
  bytes: Uint8Array;
  transfer: ArrayBuffer[] | undefined;
}

/**
 * Where the outcome of one body's reading goes: an object of the request's own (the door's
 * intake of it), rather than a closure per outcome.
 */
export interface BodyOwner {
  /** The whole body. */
  bodyDone(body: Body): void;
  /** The body is refused: answer `error`, with `connection: close` when `close` is set. */
  bodyRefused(error: ShoalError, close: boolean): void;
  /** The client left before its body ended: there is no one to answer. */
  bodyLeft(): void;
}

// The reader of a request's body, on the request while it reads.
const READER = Symbol("body reader");

/**
 * Tells the reader of a request's body, if one is still reading it, that the body failed:
 * node:http gave up on it (it did not arrive within `--request-timeout`, or is malformed) or the
 * server did (it is shutting down). The reader refuses it with `error` and `close` set.
 */
export function failBody(req: HttpRequest, error: ShoalError): void {
  (req as Reading)[READER]?.failed(error);
}

/** How long and how much a closing connection goes on reading what its client still sends. */
export interface Linger {
  ms: number;
  bytes: number;
}

// Once a body is refused, the rest of it is read and dropped, up to the limit and this many more
// bytes (or the limit again, if larger) in all and for this long, before the connection is closed.
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
 * Reads a request body of at most `limit` bytes, held against `hold` (the request's share of the
 * server's budget of body bytes) when one is given, by the bytes that have arrived (never by the
 * declared length, which a slow client could hold without sending it): refused with 429 when it
 * does not fit, at once when its declared length does not fit what is left, and
 * released here when the body is refused or its client leaves; after `bodyDone`, by whoever takes
 * the body. A refused body is never kept: from the moment it is known to be refused (from
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
export function receiveBody(req: HttpRequest, limit: number, hold: Hold | undefined, owner: BodyOwner): void {
  const length = req.headers["content-length"];
  const declared = length === undefined ? -1 : Number(length);
  if (declared > limit + Math.max(limit, DISCARD_BYTES) || (declared > limit && CONTINUE.test(req.headers.expect ?? ""))) {
    owner.bodyRefused(tooLarge(limit), true);
    return;
  }
  const reader = new BodyReader(req, limit, hold, owner);
  (req as Reading)[READER] = reader;
  // Listeners shared by every request (the reader is found on it): none made per request. They
  // stay on the request, which is dropped with them: once over, each returns at once (taking
  // them off again cost more than the rest of the reading).
  req.on("data", onData);
  req.on("end", onEnd);
  req.on("close", onClose);
  if (declared > limit) reader.refuse(tooLarge(limit), false);
  else if (declared > 0 && hold !== undefined && !hold.fits(declared)) reader.refuse(overBudget(), true);
}

type Reading = HttpRequest & { [READER]?: BodyReader };

function onData(this: Reading, chunk: Buffer): void {
  this[READER]!.data(chunk);
}

function onEnd(this: Reading): void {
  this[READER]!.end();
}

function onClose(this: Reading): void {
  this[READER]!.left();
}

// One request's reading: its state, and what its events do.
class BodyReader {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  // Reading the body, dropping it after a refusal, or finished.
  #state: "reading" | "dropping" | "over" = "reading";
  // The answer to give when a refused body ends, unless it was given at once.
  #owed: ShoalError | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly req: HttpRequest,
    readonly limit: number,
    readonly hold: Hold | undefined,
    readonly owner: BodyOwner,
  ) {}

  data(chunk: Buffer): void {
    if (this.#state === "over") return;
    if (this.#state === "dropping") {
      // Bounded by the whole body, as a declared length is: refused at its head or midway, a body
      // is read up to the limit and as much again (at least 1 MiB) before the cut-off.
      this.#size += chunk.length;
      if (this.#size > this.limit + Math.max(this.limit, DISCARD_BYTES)) this.#cutOff();
      return;
    }
    this.#size += chunk.length;
    if (this.#size > this.limit) this.refuse(tooLarge(this.limit), false);
    else if (this.hold !== undefined && !this.hold.take(chunk.length)) this.refuse(overBudget(), true);
    else this.#chunks.push(chunk);
  }

  end(): void {
    if (this.#state === "over") return;
    const whole = this.#state === "reading";
    this.#stop();
    if (!whole) {
      if (this.#owed !== undefined) this.owner.bodyRefused(this.#owed, false);
      return;
    }
    const body = assemble(this.#chunks, this.#size);
    // The socket's chunks are copied out: the listeners that outlive the reading must not keep them.
    this.#chunks.length = 0;
    this.owner.bodyDone(body);
  }

  // The client left before the body ended.
  left(): void {
    if (this.#state === "over") return;
    this.#stop();
    this.hold?.release();
    this.owner.bodyLeft();
  }

  failed(error: ShoalError): void {
    if (this.#state === "over") return;
    const answer = this.#state === "reading" ? error : this.#owed;
    this.#stop();
    this.hold?.release();
    if (answer !== undefined) this.owner.bodyRefused(answer, true);
  }

  refuse(error: ShoalError, now: boolean): void {
    this.hold?.release();
    this.#chunks.length = 0;
    this.#state = "dropping";
    this.#timer = setTimeout(() => this.#cutOff(), DISCARD_MS);
    if (now) this.owner.bodyRefused(error, false);
    else this.#owed = error;
  }

  #stop(): void {
    this.#state = "over";
    clearTimeout(this.#timer);
  }

  // Past the bounds: the answer still owed goes with `close`, or the connection is closed.
  #cutOff(): void {
    this.#stop();
    if (this.#owed !== undefined) this.owner.bodyRefused(this.#owed, true);
    else this.req.socket.destroy();
  }
}

/**
 * Reads a small body outside the budget (a control request's): {@link receiveBody} where only a
 * body over `limit` is the caller's to answer (`tooLarge`); the front answers a body node:http
 * gave up on.
 */
export function readBody(req: HttpRequest, limit: number, done: (body: Body) => void, tooLarge: (close: boolean) => void): void {
  receiveBody(req, limit, undefined, {
    bodyDone: done,
    bodyRefused: (error, close) => {
      if (error.code === "BODY_TOO_LARGE") tooLarge(close);
    },
    bodyLeft: () => undefined,
  });
}

function tooLarge(limit: number): ShoalError {
  return new ShoalError("BODY_TOO_LARGE", `the limit is ${limit} bytes`);
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
