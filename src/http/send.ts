/**
 * Whole answers written on a response, each only if none was written on it before: bytes, JSON,
 * a docs page, an error in Shoal's shape or in a dialect's.
 */
import type { OutgoingHttpHeaders, HttpResponse } from "./http-message.js";
import type { ShoalError } from "../errors.js";
import type { Dialect } from "./dialect.js";
import type { Page } from "./docs.js";

/** The content-type of every JSON answer. */
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
  if (error.retryAfterS !== undefined) headers = { ...headers, "retry-after": String(error.retryAfterS) };
  if (dialect?.errorText !== undefined) return sendText(res, requestId, error.status, dialect.errorText(error, false), headers);
  return dialect?.error === undefined ? sendError(res, requestId, error, headers) : sendJson(res, requestId, error.status, dialect.error(error), headers);
}

// Bare text with no content-type, as Mosec answers its errors; returns the body's bytes.
function sendText(res: HttpResponse, requestId: string, status: number, text: string, headers?: OutgoingHttpHeaders): number {
  if (res.headersSent || res.destroyed) return 0;
  const bytes = Buffer.byteLength(text);
  return sendBody(res, status, { ...headers, "content-length": bytes, "x-request-id": requestId }, text) ? bytes : 0;
}
