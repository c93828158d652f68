/**
 * Who may do what: whether a control request (load, unload) may go on, and which browser origins
 * may call the server. Pure decisions over the configuration and a request's headers; the doors
 * apply them (the HTTP door's CORS headers and preflights are http/cors.ts). See docs/security.md.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";

/** The switches access depends on. */
export type AccessConfig = Pick<ServerConfig, "modelControl" | "adminToken" | "corsOrigins">;

/** A request refused: the error to answer, and the headers to send with it. */
export interface Refusal {
  error: ShoalError;
  headers?: Record<string, string>;
}

const BEARER = /^Bearer +(\S+) *$/i;

/** The access decisions of one server, made from its configuration once. */
export class AccessPolicy {
  /** Whether any browser origin may call the server: `--cors-origins` lists one, or `*`. */
  readonly crossOrigin: boolean;
  readonly #open: boolean;
  readonly #tokenDigest: Buffer | undefined;
  readonly #listed: ReadonlySet<string>;
  readonly #anyOrigin: boolean;

  constructor(config: AccessConfig) {
    this.#open = config.modelControl === "explicit";
    this.#tokenDigest = config.adminToken === undefined ? undefined : digest(config.adminToken);
    this.#listed = new Set(config.corsOrigins.filter((o) => o !== "*").map((o) => o.toLowerCase()));
    this.#anyOrigin = config.corsOrigins.includes("*");
    this.crossOrigin = this.#listed.size > 0 || this.#anyOrigin;
  }

  /**
   * Why a control request with these headers is refused (403 while model control is off or for
   * an origin not listed by name, 401 without the right token), or undefined when it may go on.
   * `cancels`: it would cancel requests by id (docs/scheduling.md), not load or unload models.
   */
  control(origin: string | undefined, authorization: string | undefined, cancels = false): Refusal | undefined {
    if (!this.#open) {
      return { error: new ShoalError("FORBIDDEN", `model control is off; start the server with --model-control explicit to ${cancels ? "cancel requests by id" : "load and unload models"}`) };
    }
    // A browser sends Origin with every cross-site POST, a text/plain one with no preflight
    // included: only an origin the operator named may drive the server from a web page.
    if (origin !== undefined && !this.#listed.has(origin.toLowerCase())) {
      return { error: new ShoalError("FORBIDDEN", `origin '${origin.slice(0, 200)}' may not ${cancels ? "cancel requests" : "load or unload models"}; list it in --cors-origins`) };
    }
    if (this.#tokenDigest !== undefined && !this.#tokenMatches(authorization)) {
      const why = authorization === undefined ? "this request needs 'Authorization: Bearer <admin token>'" : "the admin token is not right";
      return { error: new ShoalError("UNAUTHORIZED", why), headers: { "www-authenticate": 'Bearer realm="shoal"' } };
    }
    return undefined;
  }

  /**
   * Whether a web page from `origin` may call the server: an origin listed by name may; `*` lets
   * every other origin call too, except for model control (`control`).
   */
  allowsOrigin(origin: string, control: boolean): boolean {
    return this.#listed.has(origin.toLowerCase()) || (!control && this.#anyOrigin);
  }

  // Digests of equal length make the comparison's time independent of the token and its length.
  #tokenMatches(authorization: string | undefined): boolean {
    const token = authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
    return token !== undefined && timingSafeEqual(digest(token), this.#tokenDigest!);
  }
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}
