import type { HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { StreamMetrics } from "../metrics/registry.js";
import type { StreamPolicy } from "../stage-options.js";
import type { Task } from "../scheduling/task.js";
import type { Dialect } from "./dialect.js";

/** How a stream's chunks are framed for its client. */
export type Transport = "sse" | "ndjson";

/** The content-type of each transport. */
export const TRANSPORT_TYPES: Record<Transport, string> = { sse: "text/event-stream", ndjson: "application/x-ndjson" };

/**
 * The transport a client asks for in its `Accept` header: Server-Sent Events or NDJSON when it
 * names one, none (the chunks gathered into one answer) when it names other types only, and the
 * route's own when it names none or accepts anything.
 */
export function negotiate(accept: string | undefined, route: Transport): Transport | undefined {
  if (accept === undefined || accept === "") return route;
  // Media types are case-insensitive.
  const types = accept.toLowerCase();
  if (types.includes("text/event-stream")) return "sse";
  if (types.includes("application/x-ndjson") || types.includes("application/jsonl")) return "ndjson";
  return types.includes("*/*") ? route : undefined;
}

const NEWLINE = /\r\n|\r|\n/;
const NEWLINE_ALL = /\r\n|\r|\n/g;

/** One chunk as its transport frames it: an SSE `data:` event (a line per line of the chunk), or an NDJSON line. */
export function frameChunk(transport: Transport, chunk: Uint8Array): Buffer {
  const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (transport === "ndjson") return Buffer.concat([bytes, LF]);
  const text = bytes.toString("utf8");
  // A chunk without line breaks (any JSON.stringify output) is framed without splitting it.
  if (!NEWLINE.test(text)) return Buffer.concat([DATA, bytes, END_EVENT]);
  return Buffer.from(`${text.split(NEWLINE).map((line) => `data: ${line}`).join("\n")}\n\n`);
}

/** The last frame of a stream that failed after it started: an SSE `error` event, or an NDJSON line, with the error's JSON (or the dialect's text). */
export function frameError(transport: Transport, error: ShoalError, dialect?: Dialect): string {
  const data = dialect?.errorText !== undefined ? dialect.errorText(error, true) : JSON.stringify(dialect?.error === undefined ? { error: error.publicMessage } : dialect.error(error));
  return transport === "sse" ? `event: error\n${data.split(NEWLINE).map((line) => `data: ${line}`).join("\n")}\n\n` : `${data.replace(NEWLINE_ALL, " ")}\n`;
}

const LF = Buffer.from("\n");
const DATA = Buffer.from("data: ");
const END_EVENT = Buffer.from("\n\n");
const KEEP_ALIVE = ": keep-alive\n\n";

/** What an answer that streams is told when its request is accepted. */
export interface StreamOptions {
  transport: Transport;
  policy: StreamPolicy;
  /** When the whole stream must have ended (performance.now() clock). */
  deadline: number;
  /** The whole stream's deadline from arrival, in ms, for its error message. */
  timeoutMs: number;
  /** An idle Server-Sent Events stream gets a comment this often, so proxies and clients keep it open. */
  keepAliveMs: number;
  metrics: StreamMetrics;
}

/**
 * The streamed answer of one request, from its first chunk: writes the head, frames each chunk,
 * keeps an idle SSE stream alive, holds the stream to its deadline, and deals with a client that
 * reads slower than chunks come (the Worker's `whenFull`: pause its generator until the backlog
 * is read, or fail the stream). Its {@link HttpReply} makes it on a response nothing was written
 * on; once it has ended, or its client left, it writes nothing more (a keep-alive timer
 * included).
 */
export class StreamReply {
  chunks = 0;
  /** Bytes written, framing included. */
  bytes = 0;
  /** Set once it has ended, normally or with an error event. */
  ended = false;
  #paused = false;
  // When the last chunk went out (performance.now()).
  #lastChunkAt: number;
  #keepAlive: NodeJS.Timeout | undefined;

  constructor(
    readonly res: HttpResponse,
    readonly task: Task,
    readonly options: StreamOptions,
    requestId: string,
    arrival: number,
    readonly dialect: Dialect | undefined,
    /** More headers of its head. */
    head: Readonly<Record<string, string>>,
  ) {
    res.writeHead(200, { ...head, "content-type": TRANSPORT_TYPES[options.transport], "cache-control": "no-cache", "x-accel-buffering": "no", "x-request-id": requestId });
    this.#lastChunkAt = performance.now();
    options.metrics.started(this.#lastChunkAt - arrival);
    this.#idle();
  }

  /** Sends one chunk. */
  write(chunk: Uint8Array): void {
    const { res, options } = this;
    if (this.ended || res.destroyed || res.writableEnded) return;
    if (this.chunks++ > 0) {
      const now = performance.now();
      options.metrics.interval(now - this.#lastChunkAt);
      this.#lastChunkAt = now;
    }
    const frame = frameChunk(options.transport, chunk);
    this.bytes += frame.byteLength;
    // What the client had not taken when this chunk came: a chunk larger than the buffer is no
    // sign of a slow client by itself.
    const backlog = res.writableLength;
    res.write(frame);
    this.#idle();
    if (res.writableLength <= options.policy.bufferBytes) return;
    if (options.policy.whenFull === "fail") {
      if (backlog > options.policy.bufferBytes) this.task.fail(new ShoalError("SLOW_CLIENT", `the client read too slowly: ${backlog} bytes waited`));
      return;
    }
    if (this.#paused) return;
    this.#paused = true;
    this.task.control?.("pause");
    res.once("drain", () => {
      this.#paused = false;
      this.task.control?.("resume");
    });
  }

  /** Ends the stream: normally, or with an error event when `error` is given. */
  end(error?: ShoalError): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.#keepAlive);
    const { res, options } = this;
    if (error !== undefined) options.metrics.cancelled(error.code === "TIMEOUT" ? "deadline" : error.code === "SLOW_CLIENT" ? "slow_client" : "error");
    options.metrics.ended(this.chunks);
    if (res.destroyed || res.writableEnded) return;
    if (error === undefined) {
      const last = this.dialect?.finish?.().map((data) => `data: ${data}\n\n`).join("");
      if (last !== undefined) this.bytes += Buffer.byteLength(last);
      res.end(last);
      return;
    }
    const frame = frameError(options.transport, error, this.dialect);
    this.bytes += Buffer.byteLength(frame);
    res.end(frame);
  }

  /** The client left before the stream ended. */
  abandoned(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.#keepAlive);
    this.options.metrics.cancelled("client");
    this.options.metrics.ended(this.chunks);
  }

  // An SSE stream idle for a while gets a comment line.
  #idle(): void {
    if (this.options.transport !== "sse") return;
    clearTimeout(this.#keepAlive);
    this.#keepAlive = setTimeout(() => {
      if (this.ended || this.res.destroyed || this.res.writableEnded) return;
      this.res.write(KEEP_ALIVE);
      this.#idle();
    }, this.options.keepAliveMs);
  }
}
