/**
 * What the fuzz holds every answer to, and the summary of a run.
 *
 * Every request gets exactly one HTTP answer (no reset, no timeout, no second answer). Its
 * status is 2xx or one of the error table's, and a 5xx only as documented:
 *
 * - 503 `service unavailable: ...`: a model that is not loaded (loading, unloaded, failed), a
 *   server that is not ready or shutting down;
 * - 500 `inference internal error`, only from the route whose Worker throws by design
 *   ({@link BUGGY_ROUTE}): a Worker's own exception costs its request, nothing more;
 * - 500 `encoding error: the Worker's answer does not fit this API`, only from the OpenAI models
 *   whose Workers answer what the routes cannot read, by design ({@link MISFIT_OPENAI_MODELS}).
 *
 * Any other 500 (`internal error`, `worker died`, `encoding error`, or `inference internal error`
 * from a route whose Worker never throws) is a finding. Every error answer is JSON,
 * exactly `{"error": "..."}`, and every answer carries an `x-request-id` (the client's, when it
 * sent a well-formed one). A request sent alone on its connection gets one answer on it, never two.
 *
 * A streamed answer (Server-Sent Events or NDJSON) read to its end is well framed, and its
 * Workers never fail it: an error event is a finding unless it is a deadline's, or that of a
 * misfit (a model or Worker whose output does not fit by design, {@link MISFIT_MODEL} among them).
 * A client that hung up on purpose is judged on what it got before it left (nothing, or the head
 * of a 200).
 */
import { ERRORS } from "../../src/errors.js";
import { RUNTIME } from "../helpers.js";
import type { Outcome } from "./client.js";
import { MISFIT_MODEL, MISFIT_OPENAI_MODELS } from "./generation.js";
import { BUGGY_ROUTE, type FuzzRequest } from "./requests.js";

/** The statuses an answer may have: success, a CORS preflight's 204, and the error table's. */
export const ALLOWED_STATUSES: ReadonlySet<number> = new Set([200, 204, ...Object.values(ERRORS).map((e) => e.status)]);

// What a request for a misfit gets: its Worker's output does not fit the API.
const MISFIT_ERROR = /^encoding error: the Worker's answer does not fit this API: /;

/** The 5xx answers that are documented, as status and exact message (or message prefix), and the requests that may get them. */
export const DOCUMENTED_5XX: readonly { status: number; message: RegExp; where: string; applies(req: FuzzRequest): boolean }[] = [
  { status: 503, message: /^service unavailable(: |$)/, where: "any route: not ready, not loaded, shutting down", applies: () => true },
  { status: 500, message: /^inference internal error$/, where: `${BUGGY_ROUTE} only: its Worker throws by design`, applies: (req) => onBuggyRoute(req) },
  { status: 500, message: MISFIT_ERROR, where: `the OpenAI models ${MISFIT_OPENAI_MODELS.join(", ")} only: their Workers answer what the routes cannot read`, applies: (req) => misfit(req) },
];

// A client's request id is echoed only when it is short and printable (as the server decides).
const ECHOED_ID = /^[\x21-\x7e]{1,200}$/;

/** The runtime the server under fuzz runs on: its HTTP parser answers what it refuses its own way. */
export type Runtime = typeof RUNTIME;

/**
 * What Bun.serve's parser does with a request it refuses, before Shoal sees it: a bare 400, 431
 * or 505 (no body, no request id), or the connection closed without an answer; and its own 400
 * after Shoal's answer when a chunked body it had not read proves malformed.
 */
function bunParser(o: Outcome): boolean {
  const raw = o.request.raw === undefined ? undefined : Buffer.from(o.request.raw).toString("latin1").toLowerCase();
  if (o.status === undefined) return raw !== undefined && (o.error === "the connection closed without an answer" || closedWhileSending(raw, o.error));
  if (o.answers === 2) return raw !== undefined && raw.includes("transfer-encoding: chunked");
  return [400, 431, 505].includes(o.status) && o.headers["x-request-id"] === undefined && o.body.byteLength === 0;
}

// Bun closes a connection that said `close` once it has answered, even while a large body is
// still being sent on it: the client may see its write fail before it reads the answer
// (README, "On Bun").
function closedWhileSending(raw: string, error: string | undefined): boolean {
  const declared = Number(/\r\ncontent-length: *(\d+)/.exec(raw)?.[1] ?? 0);
  return (error === "EPIPE" || error === "ECONNRESET") && raw.includes("\r\nconnection: close") && declared >= 1024 * 1024;
}

// A body the server refuses, on any runtime: over its limit (10 MiB; 256 KiB on the OpenAI
// routes), it reads and drops the rest up to the limit again (at least 1 MiB) and for 2 s. The
// server answers, then cuts off a client still sending past those bounds (README, 413): one that
// declares more, or one still sending 2 s on (a loaded client, a slow link), whose write may fail
// before it reads the answer.
const DISCARD_MS = 2000;
function refusedWhileSending(o: Outcome): boolean {
  const limit = openAI(o.request) ? 256 * 1024 : 10 * 1024 * 1024;
  const size = o.request.body?.byteLength ?? 0;
  const pastBounds = size > limit + Math.max(limit, 1024 * 1024) || (size > limit && o.ms >= DISCARD_MS);
  return (o.error === "EPIPE" || o.error === "ECONNRESET") && pastBounds;
}

/** What is wrong with an outcome, in words that group alike failures; undefined when nothing is. */
export function judge(o: Outcome, runtime: Runtime = RUNTIME): string | undefined {
  const req = o.request;
  if (o.unsent) return undefined;
  if (runtime === "bun" && bunParser(o)) return undefined;
  if (o.status === undefined && refusedWhileSending(o)) return undefined;
  if (o.status === undefined) return o.hungUp ? undefined : `no answer: ${o.error}`;
  if (o.answers > 1) return `${o.answers} answers to one request`;
  if (!ALLOWED_STATUSES.has(o.status)) return `status ${o.status}, which is not in the error table`;
  if (o.headers["x-request-id"] === undefined || o.headers["x-request-id"] === "") return `${o.status} without an x-request-id`;
  // A request whose head Node could not parse (431, a malformed one) is answered before its id is known.
  const sentId = req.headers.filter(([name]) => name === "x-request-id").map(([, value]) => value);
  if (req.raw === undefined && o.status !== 431 && sentId.length === 1 && ECHOED_ID.test(sentId[0]!) && o.headers["x-request-id"] !== sentId[0]) return `${o.status} with another x-request-id than the client's well-formed one`;
  if (o.status < 400) return o.hungUp ? undefined : streamProblem(o.headers["content-type"], o.body.toString("utf8"), misfit(req));
  if (o.status === 503 && isReadiness(req) && readinessBody(o.body)) return undefined;
  const type = o.headers["content-type"];
  if (type !== "application/json") return `${o.status} with content-type ${type ?? "(none)"} instead of JSON`;
  // A HEAD answer has the headers of the GET's and no body.
  let message: string | undefined;
  if (req.raw !== undefined || req.method !== "HEAD") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(o.body.toString("utf8"));
    } catch {
      return `${o.status} whose body is not JSON`;
    }
    // On the OpenAI routes too, what the HTTP parser refuses (a malformed head, headers too large) is answered in Shoal's shape.
    message = errorMessage(parsed, false) ?? (openAI(req) ? errorMessage(parsed, true) : undefined);
    if (message === undefined) return `${o.status} whose body is not {"error": "..."}${openAI(req) ? ` nor OpenAI's {"error": {"message", "type", "param", "code"}}` : ""}`;
  }
  if (o.status < 500) return undefined;
  const documented = DOCUMENTED_5XX.some((d) => d.status === o.status && (message === undefined || d.message.test(message)) && d.applies(req));
  return documented ? undefined : `${o.status} ${message ?? "(HEAD)"}`;
}

const SSE_BLOCK = /^(?:(?:data: [^\n]*)(?:\ndata: [^\n]*)*|: keep-alive|event: error\ndata: \{"error":[^\n]*\})$/;

// The message of an error body: Shoal's `{"error": "..."}`, or on the OpenAI routes OpenAI's
// `{"error": {"message", "type", "param", "code"}}`; undefined for any other shape.
function errorMessage(body: unknown, openAIShape: boolean): string | undefined {
  if (body === null || typeof body !== "object" || Object.keys(body).join() !== "error") return undefined;
  const error = (body as { error: unknown }).error;
  if (!openAIShape) return typeof error === "string" ? error : undefined;
  if (error === null || typeof error !== "object") return undefined;
  const { message, type, param, code } = error as Record<string, unknown>;
  return Object.keys(error).sort().join() === "code,message,param,type" && typeof message === "string" && typeof type === "string" && param === null && (typeof code === "string" || code === null) ? message : undefined;
}

// The OpenAI routes answer errors in OpenAI's shape.
function openAI(req: FuzzRequest): boolean {
  const path = pathOf(req);
  return path === "/v1" || path.startsWith("/v1/");
}

// What is wrong with a streamed body read to its end: bad framing, or an error event other
// than a deadline's (or, for a misfit, its output's). Undefined for a body that is not a stream.
function streamProblem(type: string | undefined, body: string, misfit: boolean): string | undefined {
  let errors: string[];
  if (type === "text/event-stream") {
    if (body !== "" && !body.endsWith("\n\n")) return "an SSE body that does not end with a blank line";
    const blocks = body === "" ? [] : body.slice(0, -2).split("\n\n");
    if (!blocks.every((block) => SSE_BLOCK.test(block))) return "an SSE body with a malformed event";
    errors = blocks.filter((block) => block.startsWith("event: error")).map((block) => block.slice("event: error\ndata: ".length));
  } else if (type === "application/x-ndjson") {
    if (body !== "" && !body.endsWith("\n")) return "an NDJSON body that does not end with a line feed";
    const lines = body === "" ? [] : body.slice(0, -1).split("\n");
    const values: unknown[] = [];
    for (const line of lines) {
      try {
        values.push(JSON.parse(line));
      } catch {
        return "an NDJSON line that is not JSON";
      }
    }
    errors = values.filter((v) => v !== null && typeof v === "object" && "error" in v).map((v) => JSON.stringify(v));
  } else {
    return undefined;
  }
  const error = errors.find((e) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(e);
    } catch {
      return true;
    }
    const message = errorMessage(parsed, false) ?? errorMessage(parsed, true);
    // A stream ends with an error event at its deadline, or when a cancel by id stops it (docs/scheduling.md).
    return message === undefined || !(message.startsWith("request timeout: ") || message.startsWith("cancelled: ") || (misfit && (MISFIT_ERROR.test(message) || message.startsWith("bad request: "))));
  });
  return error === undefined ? undefined : `a stream that failed: ${error}`;
}

// `/readyz` answers 503 with `{"ready": false, "reason": ...}`, its documented body, not an error's.
function isReadiness(req: FuzzRequest): boolean {
  return (req.method === "GET" || req.method === "HEAD") && pathOf(req) === "/readyz";
}

function readinessBody(body: Buffer): boolean {
  if (body.length === 0) return true;
  try {
    const parsed = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
    return parsed.ready === false && typeof parsed.reason === "string";
  } catch {
    return false;
  }
}

function onBuggyRoute(req: FuzzRequest): boolean {
  return req.method === "POST" && pathOf(req) === BUGGY_ROUTE;
}

// A request for a misfit: the repository's model of that name, or an OpenAI request whose body names a misfit model.
function misfit(req: FuzzRequest): boolean {
  const path = pathOf(req);
  if (path.startsWith(`/v2/models/${MISFIT_MODEL}/`)) return true;
  if (!openAI(req) || req.body === undefined) return false;
  try {
    return MISFIT_OPENAI_MODELS.includes((JSON.parse(Buffer.from(req.body).toString("utf8")) as { model?: unknown }).model as string);
  } catch {
    return false;
  }
}

// The path the server routes by: the request target without its query string.
// The path, without its query; of an absolute-form target (`http://host/path`), as Bun.serve
// reads it, the path after the authority.
function pathOf(req: FuzzRequest): string {
  const q = req.path.indexOf("?");
  const path = q < 0 ? req.path : req.path.slice(0, q);
  const absolute = RUNTIME === "bun" ? /^https?:\/\/[^/]*(\/.*)?$/i.exec(path) : null;
  return absolute === null ? path : (absolute[1] ?? "/");
}

/** Failures grouped by what went wrong, with the first few requests that showed each. */
export class Findings {
  readonly #groups = new Map<string, { count: number; examples: Outcome[] }>();

  add(problem: string, outcome: Outcome): void {
    // Numbers and long quoted parts vary from request to request; the kind of failure does not.
    const key = `${problem.replace(/\d{4,}/g, "N").replace(/'[^']{20,}'/g, "'…'").slice(0, 200)}`;
    let group = this.#groups.get(key);
    if (group === undefined) this.#groups.set(key, (group = { count: 0, examples: [] }));
    group.count++;
    if (group.examples.length < 3) group.examples.push(outcome);
  }

  get size(): number {
    return this.#groups.size;
  }

  get total(): number {
    let n = 0;
    for (const g of this.#groups.values()) n += g.count;
    return n;
  }

  /** Each kind of failure with its count and examples, most frequent first. */
  list(): { problem: string; count: number; examples: Outcome[] }[] {
    return [...this.#groups.entries()].map(([problem, g]) => ({ problem, ...g })).sort((a, b) => b.count - a.count);
  }
}

/** A request as a reader can send it again: method, path, headers and the start of the body. */
export function describeRequest(req: FuzzRequest): string {
  const show = (bytes: Uint8Array, n: number) => JSON.stringify(Buffer.from(bytes.subarray(0, n)).toString("latin1")) + (bytes.length > n ? `… (${bytes.length} bytes)` : "");
  if (req.raw !== undefined) return `#${req.index} ${req.kind}, raw bytes: ${show(req.raw, 300)}`;
  const headers = req.headers.map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 80)}… (${v.length})` : v}`).join("; ");
  const body = req.body === undefined ? "no body" : `${req.chunked ? "chunked " : ""}body ${show(req.body, 200)}`;
  const hangUp = req.hangUp === undefined ? "" : `, hanging up ${"afterBytes" in req.hangUp ? `after ${req.hangUp.afterBytes} bytes of a 200` : `${req.hangUp.afterMs} ms after sending`}`;
  return `#${req.index} ${req.kind}: ${req.method} ${req.path.length > 200 ? `${req.path.slice(0, 200)}… (${req.path.length})` : req.path} [${headers}] ${body}${hangUp}`;
}

/** Counts of a run: by status, and by kind of request and status. */
export class Tally {
  readonly byStatus = new Map<string, number>();
  readonly byKind = new Map<string, Map<string, number>>();
  count = 0;
  unsent = 0;

  add(o: Outcome): void {
    this.count++;
    if (o.unsent) this.unsent++;
    const status = o.unsent ? "unsent" : o.status === undefined ? (o.hungUp ? "left before an answer" : "no answer") : o.hungUp ? `${o.status} (left early)` : String(o.status);
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1);
    let kind = this.byKind.get(o.request.kind);
    if (kind === undefined) this.byKind.set(o.request.kind, (kind = new Map()));
    kind.set(status, (kind.get(status) ?? 0) + 1);
  }

  /** The counts as text lines, statuses in order. */
  lines(): string[] {
    const order = (m: Map<string, number>) => [...m.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([s, n]) => `${s}: ${n}`).join(", ");
    return [
      `by status: ${order(this.byStatus)}`,
      ...[...this.byKind.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([kind, m]) => `  ${kind.padEnd(22)} ${order(m)}`),
    ];
  }
}
