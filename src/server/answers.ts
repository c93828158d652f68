import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { ShoalError } from "../errors.js";
import type { Reply, Task } from "../scheduling/task.js";
import type { AccessLog } from "./access-log.js";
import type { Hold } from "./budget.js";
import type { Page } from "./docs.js";
import { compress, MIN_COMPRESSED_BYTES, responseEncoding } from "./compression.js";
import { serverTiming } from "./server-timing.js";

export const JSON_TYPE = "application/json";

/** Answers with `value` as JSON; returns the body's bytes (0 when nothing could be answered). */
export function sendJson(res: ServerResponse, requestId: string, status: number, value: unknown, headers?: OutgoingHttpHeaders): number {
  if (res.headersSent || res.destroyed) return 0;
  const body = JSON.stringify(value);
  const bytes = Buffer.byteLength(body);
  res.writeHead(status, { ...headers, "content-type": JSON_TYPE, "content-length": bytes, "x-request-id": requestId });
  res.end(body);
  return bytes;
}

/** Answers with a page of the API docs. */
export function sendPage(res: ServerResponse, requestId: string, page: Page): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, { "content-type": page.contentType, "content-length": page.body.byteLength, "cache-control": page.cacheControl, "x-request-id": requestId });
  res.end(page.body);
}

/** Every error answer: the table's status and `{"error": "<prefix>: <detail>"}`; returns the body's bytes. */
export function sendError(res: ServerResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders): number {
  return sendJson(res, requestId, error.status, { error: error.publicMessage }, headers);
}

/** What an accepted request's answer tells the front. */
export interface Answered {
  /** Set when the access log is on. */
  readonly accessLog: AccessLog | undefined;
  /** Counts an answer to a request of `path`. */
  answered(path: string, status: number, arrival: number): void;
  /** The task of an accepted request has settled. */
  released(task: Task): void;
}

/** The answer side of one accepted request. */
export class Exchange implements Reply {
  timer: NodeJS.Timeout | undefined;
  task!: Task;

  constructor(
    readonly front: Answered,
    /** The path its answers are counted under. */
    readonly path: string,
    readonly arrival: number,
    readonly res: ServerResponse,
    readonly requestId: string,
    // The request body's bytes, held against the budget until the task settles.
    readonly hold: Hold,
    /** The request body's size. */
    readonly bytesIn: number,
  ) {}

  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.res.destroyed) return;
    // A large answer goes compressed when the client takes an encoding Shoal has.
    const encoding = body.byteLength >= MIN_COMPRESSED_BYTES ? responseEncoding(this.res.req.headers["accept-encoding"]) : undefined;
    if (encoding === undefined) this.#send(body, contentType, headers);
    else compress(encoding, body, (out) => this.#send(out ?? body, contentType, out === undefined ? headers : { ...headers, "content-encoding": encoding, vary: "Accept-Encoding" }));
  }

  #send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.res.destroyed) return;
    const ms = performance.now() - this.arrival;
    this.res.writeHead(200, { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId, "server-timing": serverTiming(this.task, ms) });
    this.res.end(body);
    this.#answered(200, body.byteLength, ms);
  }

  fail(error: ShoalError): void {
    const ms = performance.now() - this.arrival;
    this.#answered(error.status, sendError(this.res, this.requestId, error, { "server-timing": serverTiming(this.task, ms) }), ms);
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
    this.hold.release();
    this.front.released(this.task);
  }
}
