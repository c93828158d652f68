/**
 * The fuzz's request generator: request `index` of a run seeded with `seed` is always the same
 * request. It picks a kind of request (a stage route with its codec, a streaming route with an
 * Accept header of any kind, V2 inference in JSON or binary, V2 metadata and health, the
 * repository's control routes, the built-in pages, a path of no route, or bytes that are hardly
 * HTTP), builds a body for it, then bends what a client controls: the method, the path's
 * spelling, the content-type and other headers; and now and then the client hangs up early.
 */
import { compressBody } from "./compressed.js";
import { brokenJson, deepJson, perturb, randomJson, writeJson, type Json } from "./json.js";
import { msgpackBody } from "./msgpack.js";
import { anyPath, joinPath, MODEL_NAMES, modelPath, spell } from "./paths.js";
import { Random } from "./random.js";
import { requestBytes } from "./raw-http.js";
import { v2Body } from "./v2.js";
import { answerTwiceDraft, embeddingsDraft, generateDraft, openAIDraft, type GenerationDraft } from "./generation.js";

/** One generated request. */
export interface FuzzRequest {
  index: number;
  /** What kind of request it was made as (`stage:json`, `v2:infer-binary`, ...), for the summary. */
  kind: string;
  method: string;
  /** The request target as sent (ASCII, except on raw requests). */
  path: string;
  headers: [string, string][];
  body: Uint8Array | undefined;
  /** Send the body with `transfer-encoding: chunked` instead of a `content-length`. */
  chunked: boolean;
  /** When set, these exact bytes are sent on a connection of their own, which then closes. */
  raw: Uint8Array | undefined;
  /**
   * When set, the client hangs up early: once this many bytes of a 200 answer's body came
   * (`afterBytes`), or this long after sending if no answer came by then (`afterMs`).
   */
  hangUp?: { afterBytes: number } | { afterMs: number };
}

/** What the generator needs to know about the server it fuzzes. */
export interface FuzzTarget {
  /** The admin token control requests need; sent right in some of them. */
  adminToken: string;
  /** An origin the server allows; sent in some requests, among origins it does not. */
  allowedOrigin: string;
}

/** The stage routes of test/fixtures/fuzz-server.ts, with the input each expects. */
export const STAGE_ROUTES = {
  json: "/fuzz/json",
  msgpack: "/fuzz/msgpack",
  bytes: "/fuzz/bytes",
  batch: "/fuzz/batch",
  typed: "/fuzz/typed",
  pipeline: "/fuzz/pipeline",
  buggy: "/fuzz/buggy",
  fanout: "/fuzz/fanout",
  stream: "/fuzz/stream",
  steps: "/fuzz/steps",
} as const;

/** The routes whose answers may be streams. */
export const STREAM_ROUTES: readonly string[] = [STAGE_ROUTES.stream, STAGE_ROUTES.steps];

/** The one route whose Worker throws a plain exception by design: its 500s are expected. */
export const BUGGY_ROUTE = STAGE_ROUTES.buggy;

const BUILTIN = ["/", "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/init.js", "/docs/favicon-32x32.png", "/docs/swagger-ui.css", "/dashboard", "/dashboard/metrics.json", "/dashboard/dashboard.js", "/dashboard/dashboard.css"];
const V2_FIXED = ["/v2", "/v2/", "/v2/health/live", "/v2/health/ready", "/v2/models/stats", "/v2/repository/index", "/v2/models", "/v2/health", "/v2/repository"];
const KNOWN = [...BUILTIN, ...V2_FIXED, ...Object.values(STAGE_ROUTES)];
const METHODS = ["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "HEAD"];
const CONTENT_TYPES = ["application/json", "application/msgpack", "application/octet-stream", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "", "*/*", "application/vnd.msgpack"];

const utf8 = new TextEncoder();

/** A stage route's near-valid input, as JSON. */
function stageInput(r: Random, route: keyof typeof STAGE_ROUTES): Json {
  switch (route) {
    case "batch":
      return { x: r.chance(0.8) ? r.int(-100, 100) / 4 : randomJson(r, 1) };
    case "typed":
      return {
        name: r.string(r.int(0, 10), "abcdef"),
        points: Array.from({ length: r.skewed(0, 6) }, () => ({ x: r.int(-50, 50), y: r.int(-50, 50) })),
        ...(r.chance(0.5) ? { scale: r.int(-3, 3) } : {}),
        ...(r.chance(0.3) ? { tags: Array.from({ length: r.skewed(0, 20) }, () => r.string(r.int(0, 5), "xyz")) } : {}),
      };
    case "pipeline":
      return { n: r.chance(0.8) ? r.skewed(0, 4096) : r.pick<Json>([-1, 1.5, 1e9, 4097, "3", null, 2 ** 53]) };
    case "stream":
      return { n: r.chance(0.85) ? r.skewed(0, 64) : r.pick<Json>([-1, 65, 1.5, "3", null]), ...(r.chance(0.5) ? { delay: r.int(0, r.chance(0.9) ? 20 : 30) } : {}) };
    case "steps":
      return { len: r.chance(0.85) ? r.skewed(0, 64) : r.pick<Json>([-1, 65, 0.5, "8", null]) };
    case "fanout":
      return { text: r.chance(0.85) ? Array.from({ length: r.skewed(0, 20) }, () => r.string(r.int(1, 6), "abc xyz")).join(" ") : r.pick<Json>([null, 3, ["a"], ""]) };
    case "buggy":
      return r.chance(0.7) ? { a: { b: r.string(r.int(0, 5), "ab") } } : randomJson(r, 2);
    default:
      return randomJson(r);
  }
}

/** A JSON body: near the route's input, random, very deep, or broken. */
function jsonBody(r: Random, near: Json): Uint8Array {
  const text = writeJson(r, r.chance(0.3) ? perturb(r, near) : near);
  return r.weighted<() => Uint8Array>([
    [12, () => utf8.encode(text)],
    [4, () => utf8.encode(writeJson(r, randomJson(r)))],
    [0.3, () => utf8.encode(deepJson(r))],
    [3, () => brokenJson(r, text)],
  ])();
}

// A few bodies far larger than usual: near the default 10 MB limit, and over it.
function bigBody(r: Random): Uint8Array {
  const size = r.pick([64 * 1024, 1024 * 1024, 10 * 1024 * 1024 - 16, 10 * 1024 * 1024 + 1, 12 * 1024 * 1024]);
  const body = new Uint8Array(size).fill(0x20);
  body[0] = 0x5b;
  body[size - 1] = 0x5d;
  return body;
}

/** Headers a client controls, at random: request ids, origins, credentials, and others. */
function extraHeaders(r: Random, target: FuzzTarget, control: boolean): [string, string][] {
  const headers: [string, string][] = [];
  if (r.chance(0.3)) {
    headers.push(["x-request-id", r.pick(["", " ", "abc", "a".repeat(200), "a".repeat(201), "a b", "\u00e9t\u00e9", "id\ttab", "x".repeat(4000), "../../etc", "{\"a\":1}", "%00", String(r.uint32())])]);
    if (r.chance(0.1)) headers.push(["x-request-id", "second"]);
  }
  if (r.chance(control ? 0.4 : 0.1)) headers.push(["origin", r.pick([target.allowedOrigin, target.allowedOrigin, "https://evil.example", "null", "http://localhost", "file://", "https://ok.example.evil", ""])]);
  if (r.chance(control ? 0.7 : 0.05)) {
    const token = target.adminToken;
    headers.push(["authorization", r.weighted([[6, `Bearer ${token}`], [1, `bearer ${token}`], [1, "Bearer wrong"], [1, `Bearer ${token}x`], [1, `Bearer ${token.slice(0, -1)}`], [1, "Basic YWRtaW46YWRtaW4="], [1, "Bearer "], [1, `Bearer ${"t".repeat(3000)}`]])]);
  }
  // What a request asks of its scheduling, well-formed or not (docs/scheduling.md).
  if (r.chance(0.08)) headers.push(["x-shoal-priority", r.pick(["0", "1", "2", "3", "99", "-1", "abc", "", " 1 ", "1.5", "9".repeat(30)])]);
  if (r.chance(0.05)) headers.push(["x-shoal-timeout-ms", r.pick(["1", "50", "1000", "0", "-5", "x", "99999999999", "1e3"])]);
  if (r.chance(0.05)) headers.push(["access-control-request-method", r.pick(["POST", "DELETE", "GET"])]);
  if (r.chance(0.05)) headers.push(["access-control-request-headers", r.pick(["content-type", "authorization", "x-request-id, inference-header-content-length"])]);
  if (r.chance(0.05)) headers.push(["accept", r.pick(["*/*", "application/msgpack", "text/html", "", "application/openmetrics-text", "application/openmetrics-text; version=1.0.0; charset=utf-8", "application/openmetrics-text; version=9"])]);
  if (r.chance(0.03)) headers.push(["content-encoding", r.pick(["gzip", "br", "identity"])]);
  if (r.chance(0.03)) headers.push(["connection", "close"]);
  if (r.chance(0.01)) headers.push(["expect", "100-continue"]);
  if (r.chance(0.02)) headers.push(["x-padding", "p".repeat(r.pick([100, 8000, 20_000]))]);
  return headers;
}

/** Requests that are hardly HTTP, sent as bytes on a connection of their own. */
function rawRequest(r: Random, path: string, body: Uint8Array): Uint8Array {
  const head = (method: string, target: string, version = "HTTP/1.1", extra = "") =>
    `${method} ${target} ${version}\r\nhost: fuzz\r\nconnection: close\r\n${extra}content-length: ${body.length}\r\n\r\n`;
  // Each makes the head the body follows; the chunked ones carry a body of their own instead.
  const [text, ownBody] = r.weighted<() => [string, boolean]>([
    [4, () => [head("POST", path), false]],
    [2, () => [head("GET", path), false]],
    [1, () => [head("get", path), false]],
    [1, () => [head("POST", `http://fuzz${path}`), false]],
    [1, () => [head("OPTIONS", "*"), false]],
    [1, () => [head("GET", path, "HTTP/1.0"), false]],
    [1, () => [head("GET", path, "HTTP/2.0"), false]],
    [1, () => [head("POST", path, "HTTP/1.1", "transfer-encoding: chunked\r\n"), false]],
    [1, () => [head("POST", path, "HTTP/1.1", "x-request-id: \u00e9\u00ff\r\n"), false]],
    [1, () => [head("POST", path, "HTTP/1.1", "x-folded: a\r\n b\r\n"), false]],
    [1, () => [head("POST", path, "HTTP/1.1", "bad header\r\n"), false]],
    [1, () => [head("POST", path, "HTTP/1.1", "x-nul: a\u0000b\r\n"), false]],
    [1, () => [`POST ${path} HTTP/1.1\nhost: fuzz\nconnection: close\ncontent-length: ${body.length}\n\n`, false]],
    [1, () => [`POST ${path} HTTP/1.1\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n`, false]],
    [1, () => [`GARBAGE ${path}\r\n\r\n`, true]],
    [1, () => [`POST ${path} HTTP/1.1\r\nhost: fuzz\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n${r.pick(["zz", "-1", "1 2", "+1", "0x1"])}\r\nx\r\n0\r\n\r\n`, true]],
  ])();
  const bytes = Buffer.from(text, "utf8");
  return ownBody ? bytes : Buffer.concat([bytes, body]);
}

/** What a kind of request makes before the client's bending: method, path, body, headers. */
type Draft = GenerationDraft;

function stageDraft(r: Random, route: keyof typeof STAGE_ROUTES, raw: boolean): Draft {
  let path: string = STAGE_ROUTES[route];
  if (r.chance(0.08)) path = joinPath(r, path.split("/").filter((s) => s).map((s) => spell(r, s, raw)));
  const near = stageInput(r, route);
  if (route === "msgpack") {
    const body = msgpackBody(r, r.chance(0.5) ? { tag: "t", values: [1, 2, r.int(0, 9)], blob: r.bytes(r.skewed(0, 32)) } : undefined);
    return { method: "POST", path, body, contentType: "application/msgpack" };
  }
  if (route === "bytes") return { method: "POST", path, body: r.chance(0.7) ? r.bytes(r.skewed(0, 4096)) : jsonBody(r, near), contentType: "application/octet-stream" };
  const headers: [string, string][] = STREAM_ROUTES.includes(STAGE_ROUTES[route]) && r.chance(0.8) ? [["accept", r.pick(ACCEPTS)]] : [];
  return { method: "POST", path, body: jsonBody(r, near), contentType: "application/json", headers };
}

// What a client of a streaming route may accept: a stream of either kind, one answer, or odd values.
const ACCEPTS = ["text/event-stream", "application/x-ndjson", "application/json", "*/*", "", "text/html", "application/json, text/event-stream", "text/event-stream;q=0", "application/jsonl", "\u00e9", "x".repeat(2000)];

function inferDraft(r: Random, binary: boolean, raw: boolean): Draft {
  const model = r.weighted<string>([[8, "mlp"], [4, "upper"], [2, "pipeline"], [2, r.pick(MODEL_NAMES)]]);
  const known = model === "mlp" || model === "upper" || model === "pipeline";
  const version = model === "mlp" && r.chance(0.3) ? `/versions/${r.pick(["1", "2"])}` : "";
  const path = r.chance(0.85) ? `/v2/models/${known ? model : encodeURIComponent(model)}${version}/infer` : modelPath(r, raw, "infer");
  const v2 = v2Body(r, model, binary);
  return { method: "POST", path, body: v2.body, contentType: v2.contentType, headers: v2.headerLength === undefined ? [] : [["inference-header-content-length", v2.headerLength]] };
}

function serverDraft(r: Random): Draft {
  const path = r.pick(V2_FIXED);
  if (path !== "/v2/repository/index") return { method: r.chance(0.8) ? "GET" : "POST", path };
  const body = r.chance(0.5) ? utf8.encode(writeJson(r, r.pick<Json>([{}, { ready: true }, { ready: "yes" }, [], null]))) : jsonBody(r, {});
  return { method: "POST", path, body, contentType: "application/json" };
}

function controlDraft(r: Random, raw: boolean): Draft {
  const model = r.weighted<string>([[6, "mlp"], [6, "upper"], [3, r.pick(MODEL_NAMES)]]);
  const action = r.weighted<string>([[3, "load"], [2, "unload"], [1, "index"]]);
  const path =
    action === "index"
      ? "/v2/repository/index"
      : r.chance(0.8)
        ? `/v2/repository/models/${encodeURIComponent(model)}/${action}`
        : joinPath(r, ["v2", "repository", "models", spell(r, model, raw), action]);
  const body = r.chance(0.5) ? undefined : utf8.encode(writeJson(r, r.pick<Json>([{}, { parameters: {} }, randomJson(r, 2)])));
  return { method: "POST", path, body, contentType: r.pick(["application/json", "text/plain", "application/x-www-form-urlencoded"]) };
}

// A cancel by id, of an id some other request of the run may carry, or of none.
function cancelDraft(r: Random, raw: boolean): Draft {
  const id = r.pick(["abc", "second", "", "a".repeat(200), "%00", "%ZZ", "../../etc", "x".repeat(3000), String(r.uint32())]);
  const path = r.chance(0.8) ? `/v2/requests/${raw ? id : encodeURIComponent(id)}` : joinPath(r, ["v2", "requests", spell(r, id, raw)]);
  return { method: r.chance(0.85) ? "DELETE" : r.pick(METHODS), path };
}

function pathDraft(r: Random, raw: boolean): Draft {
  const draft: Draft = { method: r.pick(METHODS), path: anyPath(r, raw, KNOWN) };
  if (r.chance(0.5)) {
    draft.body = jsonBody(r, randomJson(r, 2));
    draft.contentType = r.pick(CONTENT_TYPES);
  }
  return draft;
}

// A stage or V2 inference request with its body compressed (or claiming to be).
function compressedDraft(r: Random, raw: boolean): Draft {
  const draft = r.chance(0.5) ? inferDraft(r, r.chance(0.4), raw) : stageDraft(r, r.pick(["json", "batch", "msgpack", "bytes"] as const), raw);
  const { body, encoding } = compressBody(r, draft.body ?? new Uint8Array());
  return { ...draft, body, headers: [...(draft.headers ?? []), ["content-encoding", encoding], ...(r.chance(0.5) ? [["accept-encoding", r.pick(["gzip", "br", "gzip;q=0.1, br;q=0.9", "*", "identity", "deflate, gzip;q=0"])] as [string, string]] : [])] };
}

// Each kind of request, how often it comes, and how it is made.
const KINDS: readonly (readonly [number, string, (r: Random, raw: boolean) => Draft])[] = [
  [6, "stage:json", (r, raw) => stageDraft(r, "json", raw)],
  [4, "stage:msgpack", (r, raw) => stageDraft(r, "msgpack", raw)],
  [3, "stage:bytes", (r, raw) => stageDraft(r, "bytes", raw)],
  [4, "stage:batch", (r, raw) => stageDraft(r, "batch", raw)],
  [4, "stage:typed", (r, raw) => stageDraft(r, "typed", raw)],
  [4, "stage:pipeline", (r, raw) => stageDraft(r, "pipeline", raw)],
  [2, "stage:buggy", (r, raw) => stageDraft(r, "buggy", raw)],
  [3, "stage:fanout", (r, raw) => stageDraft(r, "fanout", raw)],
  [4, "stream:batched", (r, raw) => stageDraft(r, "stream", raw)],
  [3, "stream:steps", (r, raw) => stageDraft(r, "steps", raw)],
  [3, "openai:completions", (r) => openAIDraft(r, "completions")],
  [3, "openai:chat", (r) => openAIDraft(r, "chat")],
  [1, "openai:models", (r) => openAIDraft(r, "models")],
  [2, "openai:embeddings", (r) => embeddingsDraft(r)],
  [3, "v2:generate", (r) => generateDraft(r)],
  [2, "answers:twice", (r) => answerTwiceDraft(r)],
  [8, "v2:infer-json", (r, raw) => inferDraft(r, false, raw)],
  [6, "v2:infer-binary", (r, raw) => inferDraft(r, true, raw)],
  [4, "v2:model", (r, raw) => ({ method: "GET", path: modelPath(r, raw, r.pick(["", "ready", "config", "stats", "", "ready"])) })],
  [2, "v2:server", (r) => serverDraft(r)],
  // Loads cost a model's start-up each: a few are enough to race them with everything else.
  [0.5, "v2:control", (r, raw) => controlDraft(r, raw)],
  [1, "v2:cancel", (r, raw) => cancelDraft(r, raw)],
  [3, "compressed", (r, raw) => compressedDraft(r, raw)],
  [3, "builtin", (r) => ({ method: "GET", path: r.pick(BUILTIN) })],
  [3, "path", (r, raw) => pathDraft(r, raw)],
];

/** Request `index` of the run seeded with `seed`. */
export function generate(seed: number, index: number, target: FuzzTarget): FuzzRequest {
  const r = Random.of(seed, index);
  const raw = r.chance(0.03);
  const [kind, make] = r.weighted(KINDS.map(([weight, name, build]) => [weight, [name, build]] as const));
  const draft = make(r, raw);
  if (draft.alone) return alone(index, kind, draft);
  let { method, body, contentType } = draft;
  // What a client controls, bent now and then.
  if (r.chance(0.07)) method = r.pick(METHODS);
  if (r.chance(0.1)) contentType = r.pick(CONTENT_TYPES);
  if (r.chance(0.001)) body = bigBody(r);
  else if (r.chance(0.03) && body !== undefined) body = body.subarray(0, r.int(0, body.length));
  const headers: [string, string][] = [...(draft.headers ?? [])];
  if (contentType !== undefined && contentType !== "") headers.push(["content-type", contentType]);
  headers.push(...extraHeaders(r, target, kind === "v2:control" || kind === "v2:cancel"));
  const chunked = body !== undefined && body.length > 0 && r.chance(0.1);
  if (!raw) {
    const request: FuzzRequest = { index, kind, method, path: draft.path, headers, body, chunked, raw: undefined };
    // Clients of streams leave mid-stream now and then; of other routes, rarely.
    if (r.chance(kind.startsWith("stream:") || kind.startsWith("openai:") || kind === "v2:generate" ? 0.3 : 0.02)) request.hangUp = r.chance(0.6) ? { afterBytes: r.skewed(0, 400) } : { afterMs: r.int(0, 50) };
    return request;
  }
  const bytes = rawRequest(r, draft.path, body ?? new Uint8Array());
  // The method and target the raw request line really has, for judging its answer.
  const [sentMethod = "", sentPath = ""] = Buffer.from(bytes.subarray(0, 2048)).toString("utf8").split(/\r?\n/)[0]!.split(" ");
  return { index, kind: `raw:${kind}`, method: sentMethod, path: sentPath, headers: [], body, chunked: false, raw: bytes };
}

// A draft sent as it is on a connection of its own: every answer on it is counted.
function alone(index: number, kind: string, draft: Draft): FuzzRequest {
  const headers: [string, string][] = [...(draft.headers ?? []), ...(draft.contentType === undefined ? [] : [["content-type", draft.contentType] as [string, string]])];
  const raw = requestBytes(draft.method, draft.path, Object.fromEntries(headers), draft.body);
  return { index, kind, method: draft.method, path: draft.path, headers, body: draft.body, chunked: false, raw };
}
