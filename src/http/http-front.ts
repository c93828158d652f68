import type { AddressInfo } from "node:net";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/registry.js";
import { tracer } from "../metrics/tracing.js";
import type { Step } from "../scheduling/task.js";
import type { RequestMeta } from "../worker.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import { AccessLog } from "./access-log.js";
import { streamPolicy } from "../stage-options.js";
import { HttpReply, type ReplyParts } from "./http-reply.js";
import { sendError, sendFailure } from "./send.js";
import { HandlerGuard } from "./guard.js";
import type { Dialect, DialectRequest } from "./dialect.js";
import type { Delegate, DelegateParts, Inference } from "./intake.js";
import { negotiate } from "./stream-reply.js";
import { failBody, receiveBody, type Body, type BodyOwner } from "./body.js";
import type { Admission, Upload } from "../serving/admission.js";
import type { Hold } from "../serving/byte-budget.js";
import { serveBuiltin, type BuiltinState } from "./builtin.js";
import type { Health } from "../serving/health.js";
import { decodeBody } from "./compression.js";
import { answerCors } from "./cors.js";
import type { ApiDocs } from "./docs.js";
import { Dashboard } from "./dashboard.js";
import type { HttpRequest, HttpResponse, OutgoingHttpHeaders } from "./http-message.js";
import type { Handle, Listener } from "./listener.js";
import type { Route } from "../serving/route.js";
import { cacheAllowed, cacheKey, type ResponseCache } from "../scheduling/response-cache.js";
import { PRIORITY_HEADER, requestSchedule, tenantOf, TIMEOUT_HEADER } from "../serving/request-schedule.js";
import { CANCEL_PREFIX, serveCancel } from "./cancel.js";

// A stream asked for by a dialect from a step whose Worker does not stream: its one answer is its one chunk.
const DEFAULT_STREAM = streamPolicy("", true)!;

/** What the HTTP door is made of. */
export interface HttpDoorParts {
  routes: Map<string, Route>;
  config: ServerConfig;
  /** The serving core's admission, shared with the other doors. */
  admission: Admission;
  access: AccessPolicy;
  health: Health;
  metrics: Metrics;
  docs: ApiDocs;
  logger: Logger;
  /** Makes the runtime's HTTP server on the handler it is given. */
  listener: (handle: Handle) => Listener;
  /** Make the handlers of path prefixes (the dialects), with what the door lends them. */
  delegates?: ((door: DelegateParts) => Delegate)[];
  /** The dialect of every route's requests, when they are not answered in Shoal's own shape (a Mosec server's). */
  routeDialect?: Dialect;
}

/** A request whose body is still arriving, told that the server gave up: it is answered once its body ends, or cut off. */
const abandonBody = (incoming: Incoming, error: ShoalError) => failBody(incoming.req, error);

/**
 * The HTTP door: the path table, body limits, CORS, and the answer to every request; what it
 * admits enters the serving core. It never runs user code nor decodes bodies: it hands bytes to
 * the route's first stage. Its listener is the runtime's own HTTP server, chosen by its maker.
 */
export class HttpFront {
  readonly access: AccessPolicy;
  readonly metrics: Metrics;
  /** Set when the access log is on (`--access-log`, with a sample above 0). */
  readonly accessLog: AccessLog | undefined;
  readonly guard: HandlerGuard;
  readonly #listener: Listener;
  // Each route as the inference it asks for: made once.
  readonly #routes: Map<string, Inference>;
  readonly #config: ServerConfig;
  readonly #delegates: Delegate[];
  readonly admission: Admission;
  // What every reply shares, and what the built-in paths show: made once.
  readonly #replies: ReplyParts;
  readonly #builtin: BuiltinState;

  constructor(parts: HttpDoorParts) {
    const { config, admission, logger, access, metrics } = parts;
    const dialect = parts.routeDialect;
    this.#routes = new Map([...parts.routes].map(([path, route]) => [path, dialect === undefined ? { path: route.path, steps: route.stages } : { path: route.path, steps: route.stages, dialect }]));
    this.access = access;
    this.#config = config;
    this.admission = admission;
    this.metrics = metrics;
    this.guard = new HandlerGuard(logger);
    this.#delegates = (parts.delegates ?? []).map((make) => make({ access, admission, guard: this.guard }));
    this.accessLog = config.accessLog && config.accessLogSample > 0 ? new AccessLog(logger, config.accessLogSample) : undefined;
    this.#replies = { accessLog: this.accessLog, metrics, admission, guard: this.guard };
    this.#builtin = { metrics, docs: parts.docs, dashboard: config.dashboard ? new Dashboard(metrics, config.namespace) : undefined, health: parts.health, admission };
    this.#listener = parts.listener((req, res, requestId, arrival) => this.#handle(req, res, requestId, arrival));
    admission.watchArrivals(() => this.#listener.arriving);
  }

  /** The runtime's HTTP server the door runs on. */
  get server(): Listener["name"] {
    return this.#listener.name;
  }

  /** Starts listening; rejects with a one-line message when the port cannot be had. */
  listen(): Promise<AddressInfo> {
    return this.#listener.listen();
  }

  /**
   * Releases the port and closes every connection: idle ones at once, one with an answer still
   * going out once it is sent (answers given while draining end their connection), and any left
   * after `lingerMs`: cutting off an answer being written would reset the connection.
   */
  close(lingerMs = 1000): Promise<void> {
    return this.#listener.close(lingerMs);
  }

  #handle(req: HttpRequest, res: HttpResponse, requestId: string, arrival: number): void {
    this.admission.arrived(arrival);
    try {
      this.#dispatch(req, res, requestId, arrival);
    } catch (err) {
      this.guard.unexpected(err, res, requestId);
    }
  }

  #dispatch(req: HttpRequest, res: HttpResponse, requestId: string, arrival: number): void {
    if (req.httpVersion === "1.1" && req.headers.host === undefined) {
      sendError(res, requestId, new ShoalError("BAD_REQUEST", "an HTTP/1.1 request must have a Host header"), { connection: "close" });
      return;
    }
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    const route = this.#routes.get(path);
    // A cancel by id is a control request of the core's, whichever door its request came through; it answers no browser of another origin.
    if (route === undefined && path.startsWith(CANCEL_PREFIX)) {
      serveCancel(path, req, res, requestId, this);
      return;
    }
    const delegate = route === undefined ? this.#delegates.find((d) => (d.owns === undefined ? path === d.prefix || path.startsWith(`${d.prefix}/`) : d.owns(path))) : undefined;
    // CORS costs a request nothing unless origins are configured or it is a preflight.
    if ((this.access.crossOrigin || req.method === "OPTIONS") && answerCors(this.access, req, res, requestId, path, route !== undefined, delegate)) return;
    if (route !== undefined) this.#accept(route, req, res, requestId, arrival, q < 0 ? undefined : url);
    else if (delegate === undefined) serveBuiltin(path, req, res, requestId, this.#builtin);
    else {
      const inference = delegate.handle(req, res, path, requestId);
      if (inference !== undefined) this.#accept(inference, req, res, requestId, arrival, q < 0 ? undefined : url);
    }
  }

  /**
   * Takes a POST for a route or a delegate's inference: refuses it when it arrived after the
   * drain began or when its body is empty or too large, and otherwise makes its task, with its
   * deadline, and queues it at its first step. `url` is the request's when it has a query.
   */
  #accept(target: Inference, req: HttpRequest, res: HttpResponse, requestId: string, arrival: number, url: string | undefined): void {
    const { path, steps, dialect } = target;
    if (req.method !== "POST") {
      // The path as the client wrote it: a V2 request's own path is its model's canonical one.
      const written = (req.url ?? path).split("?", 1)[0];
      this.refuse(path, steps, req, res, requestId, arrival, dialect, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${written}; use POST`), { allow: "POST" });
      return;
    }
    const admission = this.admission;
    const refusal = admission.refusal(arrival);
    if (refusal !== undefined) {
      this.refuse(path, steps, req, res, requestId, arrival, dialect, refusal, { connection: "close" });
      return;
    }
    // A dialect's body parsed on this thread is bounded by what its parse may cost.
    const { maxRequestSize } = this.#config;
    const limit = dialect?.maxBytes === undefined ? maxRequestSize : Math.min(dialect.maxBytes, maxRequestSize);
    const incoming = new Incoming(this, target, req, res, requestId, arrival, url, admission.hold(), limit);
    incoming.upload = admission.uploading(incoming, abandonBody);
    receiveBody(req, limit, incoming.hold, incoming);
  }

  /** Answers a request that was not accepted, counts it, and returns its body's bytes to the budget. */
  refuse(path: string, steps: readonly Step[], req: HttpRequest, res: HttpResponse, requestId: string, arrival: number, dialect: Dialect | undefined, error: ShoalError, headers?: OutgoingHttpHeaders, hold?: Hold): void {
    const bytesIn = hold?.bytes ?? 0;
    hold?.release();
    const bytesOut = sendFailure(res, requestId, error, dialect, headers);
    const ms = performance.now() - arrival;
    this.metrics.answered(path, error.status, ms, "http");
    if (this.accessLog?.sampled()) this.accessLog.write(req, { requestId, status: error.status, durationMs: ms, bytesIn, bytesOut, route: path, steps });
  }


  /** Makes the task of a request whose body is in, with its deadline, and enters it in the core. */
  enter(incoming: Incoming, body: Body): void {
    const { req, res, requestId, arrival, hold, url } = incoming;
    const { path, dialect, v2 } = incoming.target;
    let request: DialectRequest | undefined;
    if (dialect?.read !== undefined) {
      try {
        request = dialect.read(body.bytes, req);
      } catch (err) {
        if (!(err instanceof ShoalError)) throw err;
        incoming.refuse(err);
        return;
      }
    }
    const steps = request?.steps ?? incoming.target.steps;
    const config = this.#config;
    // A request for a stream has its first chunk by --timeout; gathered or not, the whole
    // stream ends by --stream-timeout.
    const policy = steps[steps.length - 1]!.stream;
    const stream = request?.stream;
    const transport = stream === true ? "sse" : stream === false || policy === undefined ? undefined : negotiate(req.headers.accept, policy.transport);
    let timeoutMs = policy !== undefined && transport === undefined ? config.streamTimeoutMs : config.timeoutMs;
    // What it asks of its scheduling (a priority, a deadline of its own): a request that asks nothing pays two lookups.
    const { headers } = req;
    let priority = 0;
    if (headers[PRIORITY_HEADER] !== undefined || headers[TIMEOUT_HEADER] !== undefined) {
      let asked;
      try {
        asked = requestSchedule(headers[PRIORITY_HEADER], headers[TIMEOUT_HEADER], "ms");
      } catch (err) {
        if (!(err instanceof ShoalError)) throw err;
        incoming.refuse(err);
        return;
      }
      priority = asked.priority;
      if (asked.timeoutMs !== undefined) timeoutMs = Math.min(timeoutMs, asked.timeoutMs);
    }
    const waited = performance.now() - arrival;
    // A request that took its whole deadline to arrive is not queued at all.
    if (waited >= timeoutMs) {
      incoming.refuse(new ShoalError("TIMEOUT", `no answer within ${timeoutMs} ms`));
      return;
    }
    const deadline = Date.now() - waited + timeoutMs;
    // What the workers must know of it: its query string, the V2 model it is for, how it is
    // answered (a stream of events, a dialect's own form). A plain route's request pays for none of it.
    const q = url === undefined ? -1 : url.indexOf("?");
    const query = q < 0 || q === url!.length - 1 ? undefined : url!.slice(q + 1);
    const meta: RequestMeta =
      transport === undefined && request?.meta === undefined && v2 === undefined && query === undefined
        ? { requestId, headers: req.headers, deadline, route: path }
        : { requestId, headers: req.headers, deadline, route: path, ...(query === undefined ? undefined : { query }), ...(v2 === undefined ? undefined : { v2 }), ...request?.meta, ...(transport === undefined ? undefined : { stream: true }) };
    const reply = new HttpReply(this.#replies, path, arrival, res, requestId, hold, body.bytes.byteLength, dialect);
    if (tracer !== undefined) reply.traced = tracer.request(req.method ?? "POST", path, arrival, headers, requestId);
    if (transport !== undefined) {
      const streamMs = config.streamTimeoutMs;
      reply.stream = { transport, policy: policy ?? DEFAULT_STREAM, deadline: arrival + streamMs, timeoutMs: streamMs, keepAliveMs: config.sseKeepAliveMs, metrics: this.metrics.streams(path) };
    }
    (res as Answering)[REPLY] = reply;
    const { cache } = steps[0]!;
    if (cache !== undefined && this.#fromCache(cache, reply, steps, meta, body.bytes, query, transport !== undefined)) return;
    const tenant = config.tenantKey === undefined ? "" : tenantOf(config.tenantKey, (name) => headers[name]);
    this.admission.enter(steps, meta, arrival, timeoutMs, request?.payload ?? body.bytes, request === undefined ? body.transfer : undefined, reply, transport !== undefined, priority, tenant);
    res.on("close", dropTask);
  }

  // A request to a route or model with a response cache: answered from it (true), or told to keep
  // its answer. A stream, or a request that says no-cache, neither uses it nor fills it.
  #fromCache(cache: ResponseCache, reply: HttpReply, steps: readonly Step[], meta: RequestMeta, bytes: Uint8Array, query: string | undefined, streamed: boolean): boolean {
    const { path, arrival } = reply;
    const { headers } = meta;
    if (streamed || !cacheAllowed(headers["cache-control"])) {
      this.metrics.cached(path, "skip");
      return false;
    }
    const key = cacheKey(path, cache.version(), headers["content-type"] as string | undefined, query, bytes);
    const hit = cache.get(key);
    this.metrics.cached(path, hit === undefined ? "miss" : "hit");
    if (hit === undefined) {
      reply.keep = (body, contentType, kept) => cache.set(key, { body, contentType, headers: kept });
      return false;
    }
    this.admission.answerFromCache(steps, meta, arrival, reply, { ...hit, headers: { ...hit.headers, [CACHE_HEADER]: "hit" } });
    return true;
  }

  /** Its body is in, refused, or its sender gone: it is in flight now only if it entered. */
  uploaded(upload: Upload): void {
    this.admission.uploaded(upload);
  }
}

/** The header of an answer given from a response cache. */
const CACHE_HEADER = "x-shoal-cache";

// The reply of an accepted request, on its response: one listener for every response drops the
// task of a client that left, rather than a closure per request.
const REPLY = Symbol("reply");
type Answering = HttpResponse & { [REPLY]?: HttpReply };

function dropTask(this: Answering): void {
  this[REPLY]!.task.drop();
}

/**
 * A POST being taken in by the door, from its head until its task enters the core or it is
 * refused: the owner of its body's reading, and its upload in the core while its bytes arrive.
 */
export class Incoming implements BodyOwner {
  upload!: Upload;

  constructor(
    readonly front: HttpFront,
    /** What it is for: a route, or a delegate's inference. */
    readonly target: Inference,
    readonly req: HttpRequest,
    readonly res: HttpResponse,
    readonly requestId: string,
    readonly arrival: number,
    /** The request's URL when it has a query string. */
    readonly url: string | undefined,
    readonly hold: Hold,
    readonly limit: number,
  ) {}

  bodyDone(sent: Body): void {
    const encoding = this.req.headers["content-encoding"];
    // Only a body sent with a Content-Encoding is inflated.
    if (encoding === undefined) this.#take(sent, undefined);
    else decodeBody(encoding, sent, this.limit, this.hold, (body, error) => this.#take(body, error));
  }

  bodyRefused(error: ShoalError, close: boolean): void {
    this.#guarded(undefined, error, close);
  }

  bodyLeft(): void {
    this.front.uploaded(this.upload);
  }

  /** Answers it with `error`, which refuses it. */
  refuse(error: ShoalError, headers?: OutgoingHttpHeaders): void {
    const { path, steps, dialect } = this.target;
    this.front.refuse(path, steps, this.req, this.res, this.requestId, this.arrival, dialect, error, headers, this.hold);
  }

  #take(body: Body | undefined, error: ShoalError | undefined): void {
    if (body !== undefined && body.bytes.byteLength === 0) this.#guarded(undefined, new ShoalError("EMPTY_BODY", "empty request body"), false);
    else this.#guarded(body, error, false);
  }

  // Enters it, or refuses it, under the door's guard; then its bytes are no longer arriving.
  #guarded(body: Body | undefined, error: ShoalError | undefined, close: boolean): void {
    try {
      if (body !== undefined) this.front.enter(this, body);
      else this.refuse(error!, close ? { connection: "close" } : undefined);
    } catch (err) {
      this.front.guard.unexpected(err, this.res, this.requestId);
    }
    this.front.uploaded(this.upload);
  }
}
