import type { OutgoingHttpHeaders, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Reply, Task } from "../scheduling/task.js";
import type { AccessLog } from "./access-log.js";
import type { Hold } from "./budget.js";
import type { Dialect } from "./dialect.js";
import type { Page } from "./docs.js";
import { compress, MIN_COMPRESSED_BYTES, responseEncoding } from "./compression.js";
import { serverTiming } from "./server-timing.js";
import { StreamAnswer, type StreamOptions } from "./stream-answer.js";

export const JSON_TYPE = "application/json";

/** Answers with `value` as JSON; returns the body's bytes (0 when nothing could be answered). */
export function sendJson(res: HttpResponse, requestId: string, status: number, value: unknown, headers?: OutgoingHttpHeaders): number {
  if (res.headersSent || res.destroyed) return 0;
  const body = JSON.stringify(value);
  const bytes = Buffer.byteLength(body);
  res.writeHead(status, { ...headers, "content-type": JSON_TYPE, "content-length": bytes, "x-request-id": requestId });
  res.end(body);
  return bytes;
}

/** Answers with a page of the API docs. */
export function sendPage(res: HttpResponse, requestId: string, page: Page): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, { "content-type": page.contentType, "content-length": page.body.byteLength, "cache-control": page.cacheControl, "x-request-id": requestId });
  res.end(page.body);
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
}

/** The answer side of one accepted request. */
export class Exchange implements Reply {
  timer: NodeJS.Timeout | undefined;
  task!: Task;
  /** Set when its client takes a stream. */
  stream: StreamOptions | undefined;
  // The stream, from its first chunk on.
  #streaming: StreamAnswer | undefined;
  #ended = false;

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
    // A client that takes a stream from a Worker that answered once gets that answer as one chunk.
    if (this.stream !== undefined) {
      this.chunk(body);
      this.end();
      return;
    }
    if (this.res.destroyed) return;
    if (this.dialect?.answer !== undefined) {
      const shaped = this.#shaped(this.dialect.answer, body);
      if (shaped === undefined) return;
      body = shaped;
    }
    // A large answer goes compressed when the client takes an encoding Shoal has.
    const encoding = body.byteLength >= MIN_COMPRESSED_BYTES ? responseEncoding(this.res.req.headers["accept-encoding"]) : undefined;
    if (encoding === undefined) this.#send(body, contentType, headers);
    else compress(encoding, body, (out) => this.#send(out ?? body, contentType, out === undefined ? headers : { ...headers, "content-encoding": encoding, vary: "Accept-Encoding" }));
  }

  #send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.res.destroyed) return;
    this.#lastIfDraining();
    const ms = performance.now() - this.arrival;
    this.res.writeHead(200, { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId, "server-timing": serverTiming(this.task, ms) });
    this.res.end(body);
    this.#answered(200, body.byteLength, ms);
  }

  fail(error: ShoalError): void {
    this.#lastIfDraining();
    const ms = performance.now() - this.arrival;
    if (this.#streaming !== undefined) {
      this.#endStream(error);
      return;
    }
    this.#answered(error.status, sendFailure(this.res, this.requestId, error, this.dialect, { "server-timing": serverTiming(this.task, ms) }), ms);
  }

  chunk(body: Uint8Array): void {
    const shaped = this.dialect?.chunk === undefined ? body : this.#shaped(this.dialect.chunk, body);
    if (shaped !== undefined) this.#open().write(shaped);
  }

  end(): void {
    this.#open();
    this.#endStream(undefined);
  }

  // What a Worker made, in the dialect's shape; a Worker's output the dialect cannot read (not
  // the text-generation contract's JSON, say) fails the request, never the server.
  #shaped(shape: (bytes: Uint8Array) => Uint8Array, bytes: Uint8Array): Uint8Array | undefined {
    try {
      return shape.call(this.dialect, bytes);
    } catch (err) {
      const why = err instanceof ShoalError ? err.publicMessage : err instanceof Error ? err.message : String(err);
      const error = new ShoalError("ENCODING", `the Worker's answer does not fit this API: ${why}`);
      // A chunk's task is still under way (its worker is told to stop); an answer's has settled.
      if (this.task.settled) this.fail(error);
      else this.task.fail(error);
      return undefined;
    }
  }

  // The stream, started at its first chunk: from then on the whole stream's deadline holds.
  #open(): StreamAnswer {
    if (this.#streaming !== undefined) return this.#streaming;
    const options = this.stream!;
    const { task } = this;
    clearTimeout(this.timer);
    this.#lastIfDraining();
    this.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `the stream did not end within ${options.timeoutMs} ms`)), Math.max(0, options.deadline - performance.now()));
    this.#streaming = new StreamAnswer(this.res, task, options, this.requestId, this.arrival, this.dialect);
    return this.#streaming;
  }

  #endStream(error: ShoalError | undefined): void {
    const stream = this.#streaming!;
    this.#ended = true;
    stream.end(error);
    this.#answered(200, stream.bytes, performance.now() - this.arrival);
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
    if (this.#streaming !== undefined && !this.#ended) this.#streaming.abandoned();
    this.hold.release();
    this.front.released(this.task);
  }
}
