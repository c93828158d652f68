/**
 * CORS on the HTTP door: the scope of each path, the headers of an answer to a browser of another
 * origin, and preflights. Which origins may call is the access policy's decision
 * (serving/access-policy.ts).
 */
import type { HttpRequest, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import { sendError } from "./send.js";

/**
 * Which origins a path answers with CORS headers: `open` paths (inference, health, the readable
 * V2 routes) answer every allowed origin, `*` included; `control` paths only origins listed by name.
 */
export type CorsScope = "open" | "control";

/** A door that says the CORS scope of its own paths (the V2 door: load and unload are `control`). */
export interface CorsScoped {
  /** The scope of one of its paths; none (no CORS) when it has no say. */
  corsScope?(path: string): CorsScope | undefined;
}

const ALLOW_METHODS = "GET, HEAD, POST";
const ALLOW_HEADERS = "content-type, authorization, x-request-id, inference-header-content-length";
const EXPOSE_HEADERS = "x-request-id, inference-header-content-length";
// Browsers cap it anyway (Chromium at 2 h); 10 min lets a changed --cors-origins take effect soon.
const MAX_AGE_S = 600;

/**
 * The CORS scope of `path`: `open` for a stage route (`isRoute`) and the health probes; under a
 * door's prefix, what that `door` says; undefined for the rest (metrics, docs), which answer no
 * browser of another origin.
 */
export function corsScope(path: string, isRoute: boolean, door: CorsScoped | undefined): CorsScope | undefined {
  if (isRoute || path === "/healthz" || path === "/readyz") return "open";
  return door?.corsScope?.(path);
}

/** Whether a request is a CORS preflight: OPTIONS with an Origin and the method it asks for. */
export function isPreflight(method: string | undefined, origin: string | undefined, requestMethod: string | string[] | undefined): origin is string {
  return method === "OPTIONS" && origin !== undefined && typeof requestMethod === "string";
}

/**
 * The CORS headers of an answer on a path of `scope` to a request from `origin`: the origin
 * allowed and the headers it may read when it is allowed, `Vary: Origin` alone when it is not;
 * undefined when no origin is configured or the path takes no CORS.
 */
export function corsHeaders(access: AccessPolicy, origin: string | undefined, scope: CorsScope | undefined): Record<string, string> | undefined {
  if (scope === undefined || !access.crossOrigin) return undefined;
  if (origin === undefined || !access.allowsOrigin(origin, scope === "control")) return { vary: "Origin" };
  return { "access-control-allow-origin": origin, "access-control-expose-headers": EXPOSE_HEADERS, vary: "Origin" };
}

/**
 * The answer to a CORS preflight from `origin` for a path of `scope`: the headers of its 204,
 * or the 403 (sent with no CORS header) for an origin not allowed.
 */
export function preflight(access: AccessPolicy, origin: string, scope: CorsScope): Record<string, string> | ShoalError {
  if (!access.allowsOrigin(origin, scope === "control")) {
    const why = scope === "control" ? "list it by name in --cors-origins" : "list it in --cors-origins";
    return new ShoalError("FORBIDDEN", `origin '${origin.slice(0, 200)}' is not allowed; ${why}`);
  }
  return {
    "access-control-allow-origin": origin,
    "access-control-allow-methods": ALLOW_METHODS,
    "access-control-allow-headers": ALLOW_HEADERS,
    "access-control-max-age": String(MAX_AGE_S),
    vary: "Origin",
  };
}

/**
 * The CORS side of a request to `path` (a stage route's when `isRoute`, else under `door` when a
 * door's prefix holds it): a preflight is answered here (204 with the CORS headers for an allowed
 * origin, else 403 without them) and true is returned; any other request gets the CORS headers
 * its answer will carry, set before any answer is written (writeHead() merges them into every
 * kind of answer).
 */
export function answerCors(access: AccessPolicy, req: HttpRequest, res: HttpResponse, requestId: string, path: string, isRoute: boolean, door: CorsScoped | undefined): boolean {
  const scope = corsScope(path, isRoute, door);
  if (scope === undefined) return false;
  const origin = req.headers.origin;
  if (isPreflight(req.method, origin, req.headers["access-control-request-method"])) {
    const answer = preflight(access, origin, scope);
    if (answer instanceof ShoalError) sendError(res, requestId, answer);
    else {
      res.writeHead(204, { ...answer, "x-request-id": requestId });
      res.end();
    }
    return true;
  }
  const headers = corsHeaders(access, origin, scope);
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!);
  return false;
}
