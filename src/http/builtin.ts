import type { HttpRequest, HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import { wantsOpenMetrics } from "../metrics/openmetrics.js";
import type { Metrics } from "../metrics/registry.js";
import { sendBody, sendError, sendJson, sendPage } from "./send.js";
import type { ApiDocs } from "./docs.js";
import type { Dashboard } from "./dashboard.js";
import type { Health } from "../serving/health.js";
import { shuttingDown, type Admission } from "../serving/admission.js";

const GET_ONLY = "GET, HEAD";

/** What the built-in paths show. */
export interface BuiltinState {
  readonly metrics: Metrics;
  readonly docs: ApiDocs;
  /** Set with `--dashboard`. */
  readonly dashboard: Dashboard | undefined;
  readonly health: Health;
  /** The serving core's admission: whether the server is draining. */
  readonly admission: Admission;
}

/**
 * Answers the server's own GET paths: `/`, `/healthz`, `/readyz`, `/metrics` and the API docs.
 * Any other path is a 404.
 */
export function serveBuiltin(path: string, req: HttpRequest, res: HttpResponse, requestId: string, state: BuiltinState): void {
  const { metrics, docs } = state;
  const { dashboard } = state;
  const known = path === "/" || path === "/healthz" || path === "/readyz" || path === "/metrics" || docs.serves(path) || dashboard?.serves(path) === true;
  if (!known) {
    sendError(res, requestId, new ShoalError("NOT_FOUND", path));
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    sendError(res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use GET`), { allow: GET_ONLY });
    return;
  }
  if (path === "/metrics") {
    // OpenMetrics when the scraper asks for it: the form that carries exemplars.
    const open = wantsOpenMetrics(req.headers.accept);
    metrics.text(open).then(
      (text) => sendBody(res, 200, { "content-type": metrics.contentType(open), "content-length": Buffer.byteLength(text), "x-request-id": requestId, vary: "Accept" }, text),
      (err: Error) => sendError(res, requestId, new ShoalError("SERVER", `metrics: ${err.message}`)),
    );
    return;
  }
  if (docs.serves(path) || dashboard?.serves(path) === true) {
    (docs.serves(path) ? docs : dashboard!).page(path).then(
      (page) => sendPage(res, requestId, page),
      (err: ShoalError) => sendError(res, requestId, err),
    );
    return;
  }
  if (path === "/healthz") {
    // Answering at all shows the event loop turns; beyond that, only a worker crash loop
    // (--max-restarts) calls for a new process.
    const unhealthy = state.health.unhealthy();
    sendJson(res, requestId, unhealthy === undefined ? 200 : 503, unhealthy === undefined ? { live: true } : { live: false, reason: unhealthy });
    return;
  }
  const reason = state.health.notReady();
  if (path === "/") {
    if (state.admission.draining) sendError(res, requestId, shuttingDown());
    else sendJson(res, requestId, 200, { status: "serving" });
    return;
  }
  if (reason !== undefined) {
    sendJson(res, requestId, 503, { ready: false, reason });
    return;
  }
  // Still ready while some workers serve: a slot in back-off is shown, not held against the server.
  const degraded = state.health.degraded();
  sendJson(res, requestId, 200, degraded === undefined ? { ready: true } : { ready: true, degraded });
}
