/**
 * Who may do what: whether a control request (load, unload) may go on, and which browser origins
 * get CORS headers. Pure decisions over the configuration and a request's headers; the HTTP front
 * and the V2 handler apply them. See docs/security.md.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";

/** The path of a control request: `/v2/repository/models/{m}/load` or `.../unload`. */
export const CONTROL_PATH = /^\/v2\/repository\/models\/([^/]+)\/(load|unload)$/;

/**
 * Which origins a path answers with CORS headers: `open` paths (inference, health, the readable
 * V2 routes) answer every allowed origin, `*` included; `control` paths only origins listed by name.
 */
export type CorsScope = "open" | "control";

/** The switches access depends on. */
export type AccessConfig = Pick<ServerConfig, "modelControl" | "adminToken" | "corsOrigins">;

/** A request refused: the error to answer, and the headers to send with it. */
export interface Refusal {
  error: ShoalError;
  headers?: Record<string, string>;
}

const ALLOW_METHODS = "GET, HEAD, POST";
const ALLOW_HEADERS = "content-type, authorization, x-request-id, inference-header-content-length";
const EXPOSE_HEADERS = "x-request-id, inference-header-content-length";
// Browsers cap it anyway (Chromium at 2 h); 10 min lets a changed --cors-origins take effect soon.
const MAX_AGE_S = 600;
const BEARER = /^Bearer +(\S+) *$/i;

/** The access decisions of one server, made from its configuration once. */
export class AccessPolicy {
  readonly #open: boolean;
  readonly #tokenDigest: Buffer | undefined;
  readonly #listed: ReadonlySet<string>;
  readonly #anyOrigin: boolean;

  constructor(config: AccessConfig) {
    this.#open = config.modelControl === "explicit";
    this.#tokenDigest = config.adminToken === undefined ? undefined : digest(config.adminToken);
    this.#listed = new Set(config.corsOrigins.filter((o) => o !== "*").map((o) => o.toLowerCase()));
    this.#anyOrigin = config.corsOrigins.includes("*");
  }

  /**
   * Why a control request with these headers is refused (403 while model control is off or for
   * an origin not listed by name, 401 without the right token), or undefined when it may go on.
   */
  control(origin: string | undefined, authorization: string | undefined): Refusal | undefined {
    if (!this.#open) {
      return { error: new ShoalError("FORBIDDEN", "model control is off; start the server with --model-control explicit to load and unload models") };
    }
    // A browser sends Origin with every cross-site POST, a text/plain one with no preflight
    // included: only an origin the operator named may drive the server from a web page.
    if (origin !== undefined && !this.#listed.has(origin.toLowerCase())) {
      return { error: new ShoalError("FORBIDDEN", `origin '${origin.slice(0, 200)}' may not load or unload models; list it in --cors-origins`) };
    }
    if (this.#tokenDigest !== undefined && !this.#tokenMatches(authorization)) {
      const why = authorization === undefined ? "this request needs 'Authorization: Bearer <admin token>'" : "the admin token is not right";
      return { error: new ShoalError("UNAUTHORIZED", why), headers: { "www-authenticate": 'Bearer realm="shoal"' } };
    }
    return undefined;
  }

  /**
   * The CORS headers of an answer on a path of `scope` to a request from `origin`: the origin
   * allowed and the headers it may read when it is allowed, `Vary: Origin` alone when it is not;
   * undefined when no origin is configured or the path takes no CORS.
   */
  corsHeaders(origin: string | undefined, scope: CorsScope | undefined): Record<string, string> | undefined {
    if (scope === undefined || (this.#listed.size === 0 && !this.#anyOrigin)) return undefined;
    if (origin === undefined || !this.#allows(origin, scope)) return { vary: "Origin" };
    return { "access-control-allow-origin": origin, "access-control-expose-headers": EXPOSE_HEADERS, vary: "Origin" };
  }

  /**
   * The answer to a CORS preflight from `origin` for a path of `scope`: the headers of its 204,
   * or the 403 (sent with no CORS header) for an origin not allowed.
   */
  preflight(origin: string, scope: CorsScope): Record<string, string> | ShoalError {
    if (!this.#allows(origin, scope)) {
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

  #allows(origin: string, scope: CorsScope): boolean {
    return this.#listed.has(origin.toLowerCase()) || (scope === "open" && this.#anyOrigin);
  }

  // Digests of equal length make the comparison's time independent of the token and its length.
  #tokenMatches(authorization: string | undefined): boolean {
    const token = authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
    return token !== undefined && timingSafeEqual(digest(token), this.#tokenDigest!);
  }
}

/**
 * The CORS scope of `path`: `control` for load and unload, `open` for a stage route
 * (`stageRoute`), the other V2 routes and the health probes, undefined for the rest (metrics,
 * docs), which answer no browser of another origin.
 */
export function corsScope(path: string, stageRoute: boolean): CorsScope | undefined {
  if (stageRoute) return "open";
  if (CONTROL_PATH.test(path)) return "control";
  if (path === "/v2" || path.startsWith("/v2/") || path === "/healthz" || path === "/readyz") return "open";
  return undefined;
}

/** Whether a request is a CORS preflight: OPTIONS with an Origin and the method it asks for. */
export function isPreflight(method: string | undefined, origin: string | undefined, requestMethod: string | string[] | undefined): origin is string {
  return method === "OPTIONS" && origin !== undefined && typeof requestMethod === "string";
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}
