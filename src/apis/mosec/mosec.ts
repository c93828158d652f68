/**
 * What a server started by the Python SDK's `shoal.mosec` answers as Mosec does, beside Shoal's
 * own answers (docs/python.md): its routes' errors as bare text, its streams' errors as Mosec's
 * events, and Mosec's OpenAPI document at `/openapi/metadata.json` with its Swagger UI page at
 * `/openapi/swagger` (Swagger UI's files are Shoal's docs'). Mosec's metric series are
 * the registry's (metrics/mosec-series.ts).
 */
import { STATUS_CODES } from "node:http";
import { ShoalError } from "../../errors.js";
import type { HttpRequest, HttpResponse } from "../../http/http-message.js";
import type { Dialect } from "../../http/dialect.js";
import type { Delegate } from "../../http/intake.js";
import { sendBody, sendError, JSON_TYPE } from "../../http/send.js";
import { HTML_TYPE, SCRIPT_TYPE, swaggerInit, swaggerPage } from "../../http/docs.js";

// The reasons Mosec's task codes give, where its spelling is not Node's (RFC 9110 renamed 422).
const REASONS: Readonly<Record<number, string>> = { 422: "Unprocessable Content" };

/**
 * The dialect of a Mosec server's routes: an error is its text alone (`request validation
 * error: 'x'`), and in a stream, which opens once the request is queued, an `error` event whose
 * data is `SSE inference error: 422: Unprocessable Content: request validation error: ...`.
 * What refuses a request before it is queued (a full queue, 429; a server not serving, 503) is
 * answered with its status, as Mosec answers it.
 */
export const MOSEC_DIALECT: Dialect = {
  errorInStream: (error: ShoalError) => error.status !== 429 && error.status !== 503,
  errorText(error: ShoalError, inStream: boolean): string {
    if (!inStream) return error.publicMessage;
    return `SSE inference error: ${error.status}: ${REASONS[error.status] ?? STATUS_CODES[error.status] ?? "Error"}: ${error.publicMessage}`;
  },
};

/** Where Mosec serves its OpenAPI document. */
export const MOSEC_OPENAPI_PATH = "/openapi/metadata.json";

/** Mosec's OpenAPI document (made by `shoal.mosec` from its Workers' annotations) and its page, under `/openapi`. */
export class MosecOpenApi implements Delegate {
  readonly prefix = "/openapi";
  // Each path's content-type and body, made once; the page is relative to /openapi/swagger.
  readonly #pages: ReadonlyMap<string, readonly [string, Buffer]>;

  constructor(document: Readonly<Record<string, unknown>>) {
    this.#pages = new Map([
      [MOSEC_OPENAPI_PATH, [JSON_TYPE, Buffer.from(JSON.stringify(document))]],
      ["/openapi/swagger", [HTML_TYPE, swaggerPage("../docs/", "swagger-init.js")]],
      ["/openapi/swagger-init.js", [SCRIPT_TYPE, swaggerInit("metadata.json")]],
    ]);
  }

  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string): undefined {
    const page = this.#pages.get(path);
    if (page === undefined) sendError(res, requestId, new ShoalError("NOT_FOUND", path));
    else if (req.method !== "GET" && req.method !== "HEAD") sendError(res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use GET`), { allow: "GET, HEAD" });
    else sendBody(res, 200, { "content-type": page[0], "content-length": page[1].byteLength, "x-request-id": requestId }, page[1]);
    return undefined;
  }
}
