import type { OutgoingHttpHeaders, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Reply, Task } from "../scheduling/task.js";
import type { AccessLog } from "./access-log.js";
import type { Hold } from "../serving/byte-budget.js";
import type { Dialect } from "./dialect.js";
import type { Page } from "./docs.js";
import { compress, MIN_COMPRESSED_BYTES, responseEncoding } from "./compression.js";
import { serverTiming } from "./server-timing.js";
import { StreamAnswer, type StreamOptions } from "./stream-reply.js";

export const JSON_TYPE = "application/json";

/**
 * Writes a whole answer, unless one was written or begun on `res` already or its client left:
 * a request is answered once, whoever asks for a second answer (node:http throws on a second
 * head). Returns whether it was written.
 */
export function sendBody(res: HttpResponse, status: number, headers: OutgoingHttpHeaders, body: Uint8Array | string): boolean {
  if (res.headersSent || res.writableEnded || res.destroyed) return false;
  res.writeHead(status, headers);
  res.end(body);
  return true;
}

/** Answers with `value` as JSON; returns the body's bytes (0 when nothing could be answered). */
export function sendJson(res: HttpResponse, requestId: string, status: number, value: unknown, headers?: OutgoingHttpHeaders): number {
  if (res.headersSent || res.destroyed) return 0;
  const body = JSON.stringify(value);
  const bytes = Buffer.byteLength(body);
  return sendBody(res, status, { ...headers, "content-type": JSON_TYPE, "content-length": bytes, "x-request-id": requestId }, body) ? bytes : 0;
}

/** Answers with a page of the API docs. */
export function sendPage(res: HttpResponse, requestId: string, page: Page): void {
  sendBody(res, 200, { "content-type": page.contentType, "content-length": page.body.byteLength, "cache-control": page.cacheControl, "x-request-id": requestId }, page.body);
}

/** Every error answer: the table's status and `{"error": "<prefix>: <detail>"}`; returns the body's bytes. */
export function sendError(res: HttpResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders): number {
  return sendJson(res, requestId, error.status, { error: error.publicMessage }, headers);
}

/** An error's answer: in the dialect's shape when the request has one, else Shoal's; returns the body's bytes. */
export function sendFailure(res: HttpResponse, requestId: string, error: ShoalError, dialect: Dialect | undefined, headers?: OutgoingHttpHeaders): number {
  return dialect?.error === undefined ? sendError(res, requestId, error, headers) : sendJson(res, requestId, error.status, dialect.error(error), headers);
}

/** What an accepted request's answer tells the front. */
export interface Answered {
  /** Set when the access log is on. */
  readonly accessLog: AccessLog | undefined;
  /** Counts an answer to a request of `path`. */
  answered(path: string, status: number, arrival: number): void;
  /** The task of an accepted request has settled. */
  released(task: Task): void;
  /** The server is shutting down. */
  readonly draining: boolean;
  /** Logs an exception of ours while answering, and answers 500 or cuts the answer off. */
  unexpected(err: unknown, res: HttpResponse, requestId: string): void;
}

/**
 * The answer side of one accepted request, and the one writer of its answer: a whole answer, an
 * error, or a stream's head, chunks and end. Once the answer is given (or its stream ended),
 * every later call is ignored, whoever makes it (a stream whose last chunk does not fit its
 * dialect, a late timer); an exception while writing costs the request, never the process.
 */
export class Exchange implements Reply {
  timer: NodeJS.Timeout | undefined;
  task!: Task;
  /** Set when its client takes a stream. */
  stream: StreamOptions | undefined;
  // The stream, from its first chunk on.
  #streaming: StreamAnswer | undefined;
  // The answer is given, or its stream ended: nothing more is written.
  #done = false;

  constructor(
    readonly front: Answered,
    /** The path its answers are counted under. */
    readonly path: string,
    readonly arrival: number,
    readonly res: HttpResponse,
    readonly requestId: string,
    // The request body's bytes, held against the budget until the task settles.
    readonly hold: Hold,
    /** The request body's size. */
    readonly bytesIn: number,
    /** The API its answers are shaped for, when not Shoal's own. */
    readonly dialect: Dialect | undefined,
  ) {}

  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.#done) return;
    // A client that takes a stream from a Worker that answered once gets that answer as one chunk.
    if (this.stream !== undefined) {
      this.chunk(body);
      this.end();
      return;
    }
    const shaped = this.dialect?.answer === undefined ? body : this.#shaped(this.dialect.answer, body);
    if (shaped instanceof ShoalError) {
      this.fail(shaped);
      return;
    }
    this.#done = true;
    // A large answer goes compressed when the client takes an encoding Shoal has.
    const encoding = shaped.byteLength >= MIN_COMPRESSED_BYTES ? responseEncoding(this.res.req.headers["accept-encoding"]) : undefined;
    if (encoding === undefined) this.#send(shaped, contentType, headers);
    else compress(encoding, shaped, (out) => this.#send(out ?? shaped, contentType, out === undefined ? headers : { ...headers, "content-encoding": encoding, vary: "Accept-Encoding" }));
  }

  // Runs once the body is ready (compressed, maybe, after its client left).
  #send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    try {
      this.#lastIfDraining();
      const ms = performance.now() - this.arrival;
      const head = { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId, "server-timing": serverTiming(this.task, ms) };
      if (sendBody(this.res, 200, head, body)) this.#answered(200, body.byteLength, ms);
    } catch (err) {
      this.#unexpected(err);
    }
  }

  fail(error: ShoalError): void {
    if (this.#done) return;
    this.#done = true;
    try {
      this.#lastIfDraining();
      if (this.#streaming !== undefined) {
        this.#endStream(error);
        return;
      }
      const ms = performance.now() - this.arrival;
      this.#answered(error.status, sendFailure(this.res, this.requestId, error, this.dialect, { "server-timing": serverTiming(this.task, ms) }), ms);
    } catch (err) {
      this.#unexpected(err);
    }
  }

  chunk(body: Uint8Array): void {
    if (this.#done) return;
    const shaped = this.dialect?.chunk === undefined ? body : this.#shaped(this.dialect.chunk, body);
    if (shaped instanceof ShoalError) {
      // A chunk's task is still under way (its worker is told to stop); an answer's has settled.
      if (this.task.settled) this.fail(shaped);
      else this.task.fail(shaped);
      return;
    }
    try {
      this.#open()?.write(shaped);
    } catch (err) {
      this.#unexpected(err);
    }
  }

  end(): void {
    if (this.#done) return;
    this.#done = true;
    try {
      if (this.#open() !== undefined) this.#endStream(undefined);
    } catch (err) {
      this.#unexpected(err);
    }
  }

  // What a Worker made, in the dialect's shape; the error to answer for a Worker's output the
  // dialect cannot read (not the text-generation contract's JSON, say), or would take too long to.
  #shaped(shape: (bytes: Uint8Array) => Uint8Array, bytes: Uint8Array): Uint8Array | ShoalError {
    const most = this.dialect!.maxBytes;
    let why: string;
    if (most !== undefined && bytes.byteLength > most) why = `its ${bytes.byteLength} bytes are more than the ${most} this API reads`;
    else {
      try {
        return shape.call(this.dialect, bytes);
      } catch (err) {
        why = err instanceof ShoalError ? err.publicMessage : err instanceof Error ? err.message : String(err);
      }
    }
    return new ShoalError("ENCODING", `the Worker's answer does not fit this API: ${why}`);
  }

  // The stream, started at its first chunk: from then on the whole stream's deadline holds.
  // Undefined when an answer was written on the response already, by whatever means.
  #open(): StreamAnswer | undefined {
    if (this.#streaming !== undefined) return this.#streaming;
    const { res, task } = this;
    if (res.headersSent || res.writableEnded) return undefined;
    const options = this.stream!;
    clearTimeout(this.timer);
    this.#lastIfDraining();
    this.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `the stream did not end within ${options.timeoutMs} ms`)), Math.max(0, options.deadline - performance.now()));
    this.#streaming = new StreamAnswer(res, task, options, this.requestId, this.arrival, this.dialect);
    return this.#streaming;
  }

  #endStream(error: ShoalError | undefined): void {
    const stream = this.#streaming!;
    stream.end(error);
    this.#answered(200, stream.bytes, performance.now() - this.arrival);
  }

  // An exception while writing (a header a Worker gave that node:http refuses, a dialect's hook
  // that throws): logged, and the request answered 500 or cut off; nothing more is written.
  #unexpected(err: unknown): void {
    this.#done = true;
    this.front.unexpected(err, this.res, this.requestId);
  }

  // An answer given while the server drains says `connection: close` and ends its connection:
  // a client that sent its next request on it could otherwise have it cut off as the server
  // closes its connections.
  #lastIfDraining(): void {
    if (this.front.draining) this.res.shouldKeepAlive = false;
  }

  #answered(status: number, bytesOut: number, ms: number): void {
    this.front.answered(this.path, status, this.arrival);
    const log = this.front.accessLog;
    if (log?.sampled()) {
      const { task } = this;
      log.write(this.res.req, { requestId: this.requestId, status, durationMs: ms, bytesIn: this.bytesIn, bytesOut, route: this.path, steps: task.steps, task });
    }
  }

  release(): void {
    clearTimeout(this.timer);
    this.#streaming?.abandoned();
    this.hold.release();
    this.front.released(this.task);
  }
}
