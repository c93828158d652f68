import type { HttpRequest, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Metrics } from "../metrics/registry.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import type { Admission } from "../serving/admission.js";
import { sendError, sendJson } from "./send.js";

/** The path under which a request is cancelled by its id: `DELETE /v2/requests/{id}`. */
export const CANCEL_PREFIX = "/v2/requests/";

/** What a cancel by id needs of the server. */
export interface CancelParts {
  readonly access: AccessPolicy;
  readonly admission: Admission;
  readonly metrics: Metrics;
}

/**
 * `DELETE /v2/requests/{id}`: cancels the requests in flight with that `x-request-id`, under
 * the control API's access rules (an id is no secret: a client may choose its own, and it is
 * written in logs), whatever door they came through. 200 `{"cancelled": n}`, or 404 when none
 * is in flight. Each cancelled request is answered 409 `cancelled: …` (docs/scheduling.md).
 */
export function serveCancel(path: string, req: HttpRequest, res: HttpResponse, requestId: string, parts: CancelParts): void {
  if (req.method !== "DELETE") {
    sendError(res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use DELETE`), { allow: "DELETE" });
    return;
  }
  let id: string;
  try {
    id = decodeURIComponent(path.slice(CANCEL_PREFIX.length));
  } catch {
    sendError(res, requestId, new ShoalError("BAD_REQUEST", `malformed percent-encoding in the path: '${path.slice(0, 100)}'`));
    return;
  }
  const refused = parts.access.control(req.headers.origin, req.headers.authorization, true);
  if (refused !== undefined) {
    sendError(res, requestId, refused.error, refused.headers);
    return;
  }
  const cancelled = id === "" ? 0 : parts.admission.cancel(id);
  if (cancelled === 0) {
    sendError(res, requestId, new ShoalError("NOT_FOUND", `no request '${id.slice(0, 200)}' is in flight`));
    return;
  }
  parts.metrics.cancelled("id", cancelled);
  sendJson(res, requestId, 200, { cancelled });
}
