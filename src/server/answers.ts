import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { ShoalError } from "../errors.js";
import type { Reply, Task } from "../scheduling/task.js";
import type { Hold } from "./budget.js";
import type { Page } from "./docs.js";

export const JSON_TYPE = "application/json";

/** Answers with `value` as JSON. */
export function sendJson(res: ServerResponse, requestId: string, status: number, value: unknown, headers?: OutgoingHttpHeaders): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value);
  res.writeHead(status, { ...headers, "content-type": JSON_TYPE, "content-length": Buffer.byteLength(body), "x-request-id": requestId });
  res.end(body);
}

/** Answers with a page of the API docs. */
export function sendPage(res: ServerResponse, requestId: string, page: Page): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, { "content-type": page.contentType, "content-length": page.body.byteLength, "cache-control": page.cacheControl, "x-request-id": requestId });
  res.end(page.body);
}

/** Every error answer: the table's status and `{"error": "<prefix>: <detail>"}`. */
export function sendError(res: ServerResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders): void {
  sendJson(res, requestId, error.status, { error: error.publicMessage }, headers);
}

/** What an accepted request's answer tells the front. */
export interface Answered {
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
  ) {}

  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.res.destroyed) return;
    this.res.writeHead(200, { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId });
    this.res.end(body);
    this.front.answered(this.path, 200, this.arrival);
  }

  fail(error: ShoalError): void {
    sendError(this.res, this.requestId, error);
    this.front.answered(this.path, error.status, this.arrival);
  }

  release(): void {
    clearTimeout(this.timer);
    this.hold.release();
    this.front.released(this.task);
  }
}
