import type { HttpRequest, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import { corsScope, isPreflight, type AccessPolicy } from "../serving/access-policy.js";
import { sendError } from "./send.js";

/**
 * The CORS side of a request to `path` (a stage route's when `isRoute`): a preflight is answered
 * here (204 with the CORS headers for an allowed origin, else 403 without them) and true is
 * returned; any other request gets the CORS headers its answer will carry, set before any answer
 * is written (writeHead() merges them into every kind of answer).
 */
export function answerCors(access: AccessPolicy, req: HttpRequest, res: HttpResponse, requestId: string, path: string, isRoute: boolean): boolean {
  const scope = corsScope(path, isRoute);
  if (scope === undefined) return false;
  const origin = req.headers.origin;
  if (isPreflight(req.method, origin, req.headers["access-control-request-method"])) {
    const answer = access.preflight(origin, scope);
    if (answer instanceof ShoalError) sendError(res, requestId, answer);
    else {
      res.writeHead(204, { ...answer, "x-request-id": requestId });
      res.end();
    }
    return true;
  }
  const headers = access.corsHeaders(origin, scope);
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!);
  return false;
}
