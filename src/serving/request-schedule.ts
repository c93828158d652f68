import { createHash } from "node:crypto";
import { ShoalError } from "../errors.js";
import type { TenantKey } from "../config.js";

/** The header a plain HTTP request asks its priority with: 1 is the highest level, 0 the default (docs/scheduling.md). */
export const PRIORITY_HEADER = "x-shoal-priority";
/** The header a plain HTTP request shortens its deadline with, in ms. */
export const TIMEOUT_HEADER = "x-shoal-timeout-ms";

/** What a request asks of its scheduling. */
export interface RequestSchedule {
  /** The priority level it asks, 0 for its queue's default; its queue says whether it has that level. */
  readonly priority: number;
  /** Its own deadline from its arrival, in ms, within the server's; undefined: the server's. */
  readonly timeoutMs: number | undefined;
}

const DIGITS = /^[0-9]{1,15}$/;

/**
 * Reads what a request asks of its scheduling, whatever door it came through: the HTTP headers
 * {@link PRIORITY_HEADER} and {@link TIMEOUT_HEADER} (`unit` ms), or a gRPC request's V2
 * `parameters.priority` and `parameters.timeout` (`unit` µs, as Triton's). A value that is not
 * a whole number (0 or more; a timeout above 0) is the client's mistake: 400.
 */
export function requestSchedule(priority: unknown, timeout: unknown, unit: "ms" | "us"): RequestSchedule {
  const asked = priority === undefined ? 0 : whole(priority, unit === "ms" ? PRIORITY_HEADER : "parameters.priority");
  if (timeout === undefined) return { priority: asked, timeoutMs: undefined };
  const value = whole(timeout, unit === "ms" ? TIMEOUT_HEADER : "parameters.timeout");
  if (value === 0) throw new ShoalError("BAD_REQUEST", `${unit === "ms" ? TIMEOUT_HEADER : "parameters.timeout"} must be above 0`);
  return { priority: asked, timeoutMs: unit === "ms" ? value : value / 1000 };
}

// A whole number of 0 or more, from a header's text or a parameter's number (or its decimal text when it is not exact).
function whole(value: unknown, name: string): number {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === "string" && DIGITS.test(value.trim())) return Number(value.trim());
  const shown = typeof value === "string" ? `'${value.slice(0, 40)}'` : Array.isArray(value) ? "several values" : typeof value;
  throw new ShoalError("BAD_REQUEST", `${name} must be a whole number of 0 or more, not ${shown}`);
}

/** Most characters of a tenant's name: a longer one is cut. */
const TENANT_CHARS = 64;

/**
 * The tenant a request names by `key`, whatever door it came through ("" when it names none):
 * `header` reads a header (HTTP) or the call's metadata (gRPC), `parameter` a gRPC request's
 * V2 parameter, else the header. An API key is never shown: its tenant is `key-` and the first
 * 12 hex digits of its SHA-256.
 */
export function tenantOf(key: TenantKey, header: (name: string) => unknown, parameter?: (name: string) => unknown): string {
  if (key.from === "api-key") {
    const auth = header("authorization");
    const bearer = typeof auth === "string" && /^bearer /i.test(auth) ? auth.slice(7).trim() : header("x-api-key");
    return typeof bearer === "string" && bearer !== "" ? `key-${createHash("sha256").update(bearer).digest("hex").slice(0, 12)}` : "";
  }
  const value = (key.from === "parameter" ? parameter?.(key.name) : undefined) ?? header(key.name.toLowerCase());
  return typeof value === "string" ? value.trim().slice(0, TENANT_CHARS) : typeof value === "number" ? String(value) : "";
}
