import type { HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Reply, Task } from "../scheduling/task.js";
import type { AccessLog } from "./access-log.js";
import type { Hold } from "../serving/byte-budget.js";
import type { Dialect } from "./dialect.js";
import { compress, MIN_COMPRESSED_BYTES, responseEncoding } from "./compression.js";
import { sendBody, sendFailure } from "./send.js";
import { StreamReply, type StreamOptions } from "./stream-reply.js";
import type { Metrics } from "../metrics/registry.js";
import { LOAD_REPORT, LOAD_REPORT_FORMAT, loadReport } from "../metrics/load-report.js";
import type { RequestTrace } from "../metrics/tracing.js";
import type { Admission } from "../serving/admission.js";
import type { HandlerGuard } from "./guard.js";

/** What the replies of the HTTP door share, made once with it. */
export interface ReplyParts {
  /** Set when the access log is on. */
  readonly accessLog: AccessLog | undefined;
  /** Where each answer is counted. */
  readonly metrics: Metrics;
  /** The serving core's admission: whether the server drains, and where a settled task is released. */
  readonly admission: Admission;
  /** Logs an exception of ours while answering, and answers 500 or cuts the answer off. */
  readonly guard: HandlerGuard;
}

/**
 * The reply to one accepted HTTP request, the answer side of its task, and the one writer of its
 * answer: a whole answer, an error, or a stream's head, chunks and end. Once the answer is given
 * (or its stream ended), every later call is ignored, whoever makes it (a stream whose last
 * chunk does not fit its dialect, a late timer); an exception while writing costs the request,
 * never the process.
 */
export class HttpReply implements Reply {
  timer: NodeJS.Timeout | undefined;
  task!: Task;
  /** Set when its client takes a stream. */
  stream: StreamOptions | undefined;
  /** Set when the request's answer may be kept in a response cache: called with the Worker's answer. */
  keep: ((body: Uint8Array, contentType: string, headers: Record<string, string> | undefined) => void) | undefined;
  /** Its span, when tracing is on and samples it. */
  traced: RequestTrace | undefined;
  // The stream, from its first chunk on.
  #streaming: StreamReply | undefined;
  // The answer is given, or its stream ended: nothing more is written.
  #done = false;

  constructor(
    readonly parts: ReplyParts,
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
    this.keep?.(body, contentType, headers);
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
      const head: Record<string, string | number> = { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId, "server-timing": serverTiming(this.task, ms) };
      this.#reportLoad(head);
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
      // A dialect whose streams open at once tells a stream's client of its error in the stream.
      if (this.#streaming === undefined && this.stream !== undefined && this.dialect?.errorInStream?.(error) === true) this.#open();
      if (this.#streaming !== undefined) {
        this.#endStream(error);
        return;
      }
      const ms = performance.now() - this.arrival;
      const head: Record<string, string> = { "server-timing": serverTiming(this.task, ms) };
      this.#reportLoad(head);
      this.#answered(error.status, sendFailure(this.res, this.requestId, error, this.dialect, head), ms);
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
  #open(): StreamReply | undefined {
    if (this.#streaming !== undefined) return this.#streaming;
    const { res, task } = this;
    if (res.headersSent || res.writableEnded) return undefined;
    const options = this.stream!;
    clearTimeout(this.timer);
    this.#lastIfDraining();
    this.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `the stream did not end within ${options.timeoutMs} ms`)), Math.max(0, options.deadline - performance.now()));
    const head: Record<string, string> = {};
    this.#reportLoad(head);
    this.#streaming = new StreamReply(res, task, options, this.requestId, this.arrival, this.dialect, head);
    return this.#streaming;
  }

  #endStream(error: ShoalError | undefined): void {
    const stream = this.#streaming!;
    stream.end(error);
    this.#answered(200, stream.bytes, performance.now() - this.arrival);
  }

  // A gateway that asks (ORCA's request header) gets the server's load in the answer's head.
  #reportLoad(head: Record<string, string | number>): void {
    const format = this.res.req.headers[LOAD_REPORT_FORMAT];
    if (typeof format !== "string") return;
    const report = loadReport(format, this.parts.metrics.load());
    if (report !== undefined) head[LOAD_REPORT] = report;
  }

  // An exception while writing (a header a Worker gave that node:http refuses, a dialect's hook
  // that throws): logged, and the request answered 500 or cut off; nothing more is written.
  #unexpected(err: unknown): void {
    this.#done = true;
    this.parts.guard.unexpected(err, this.res, this.requestId);
  }

  // An answer given while the server drains says `connection: close` and ends its connection:
  // a client that sent its next request on it could otherwise have it cut off as the server
  // closes its connections.
  #lastIfDraining(): void {
    if (this.parts.admission.draining) this.res.shouldKeepAlive = false;
  }

  #answered(status: number, bytesOut: number, ms: number): void {
    const { metrics, accessLog: log } = this.parts;
    metrics.answered(this.path, status, ms, "http", this.task, this.traced?.exemplar);
    this.traced?.end(status, this.arrival + ms);
    if (log?.sampled()) {
      const { task } = this;
      log.write(this.res.req, { requestId: this.requestId, status, durationMs: ms, bytesIn: this.bytesIn, bytesOut, route: this.path, steps: task.steps, task, traced: this.traced });
    }
  }

  release(): void {
    clearTimeout(this.timer);
    this.#streaming?.abandoned();
    this.hold.release();
    this.parts.admission.released(this.task);
  }
}

/**
 * The `Server-Timing` header of an accepted request's answer: its time in queues, at workers
 * (round trip included) and in all, in ms. The parts are rounded down and the total up, so that
 * queue + forward ≤ total holds as written.
 */
export function serverTiming(task: Task, totalMs: number): string {
  return `queue;dur=${hundredths(Math.floor(task.queueMs * 100))}, forward;dur=${hundredths(Math.floor(task.forwardMs * 100))}, total;dur=${hundredths(Math.ceil(totalMs * 100))}`;
}

// A count of hundredths of a ms as `String(h / 100)` writes it (12.3, 0.05, 7), from whole
// numbers only: on every answer, formatting three fractions cost three times as much.
function hundredths(h: number): string {
  const whole = Math.trunc(h / 100);
  const rest = h - whole * 100;
  if (rest === 0) return `${whole}`;
  if (rest % 10 === 0) return `${whole}.${rest / 10}`;
  return rest < 10 ? `${whole}.0${rest}` : `${whole}.${rest}`;
}
