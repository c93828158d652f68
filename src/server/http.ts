import type { AddressInfo } from "node:net";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics, Protocol } from "../metrics/registry.js";
import { Task, type Step } from "../scheduling/task.js";
import { AccessPolicy } from "./access.js";
import { AccessLog } from "./access-log.js";
import { streamPolicy } from "../stage-options.js";
import { Exchange, sendError, sendFailure, type Answered } from "./answers.js";
import type { Dialect, DialectRequest } from "./dialect.js";
import type { Delegate, Intake } from "./intake.js";
import { negotiate } from "./stream-answer.js";
import { Ledger } from "./ledger.js";
import { receiveBody, type Body } from "./body.js";
import { ByteBudget, type Hold } from "./budget.js";
import { serveBuiltin, type BuiltinState, type Health } from "./builtin.js";
import { decodeBody } from "./compression.js";
import { answerCors } from "./cors.js";
import type { ApiDocs } from "./docs.js";
import type { HttpRequest, HttpResponse, OutgoingHttpHeaders } from "./http-message.js";
import { BunListener, isBun } from "./bun-listener.js";
import { NodeListener } from "./node-listener.js";
import type { Handle, Listener } from "./listener.js";
import type { Route } from "./route.js";

/** How long a drain waits with no request arriving before it ends: clients still sending get their 503 first. */
const QUIET_MS = 100;

/** One request being taken, as `accept` passes it on. */
interface Incoming {
  path: string;
  steps: readonly Step[];
  req: HttpRequest;
  res: HttpResponse;
  requestId: string;
  arrival: number;
  dialect: Dialect | undefined;
}

// A stream asked for by a dialect from a step whose Worker does not stream: its one answer is its one chunk.
const DEFAULT_STREAM = streamPolicy("", true)!;

/**
 * The HTTP front: routing, body limits, deadlines, and the answer to every request. It never
 * runs user code nor decodes bodies: it hands bytes to the route's first stage. Its listener is
 * the runtime's own HTTP server: Bun.serve on Bun, node:http elsewhere.
 */
export class HttpFront implements Intake, Answered, BuiltinState {
  readonly access: AccessPolicy;
  readonly metrics: Metrics;
  readonly docs: ApiDocs;
  readonly health: Health;
  /** Set when the access log is on (`--access-log`, with a sample above 0). */
  readonly accessLog: AccessLog | undefined;
  readonly #listener: Listener;
  readonly #routes: Map<string, Route>;
  readonly #config: ServerConfig;
  readonly #delegates: Delegate[];
  readonly #log: Logger;
  readonly #budget: ByteBudget;
  // When each request being handled arrived: its first byte (performance.now()).
  #inFlight = 0;
  /** The tasks of requests accepted and not yet answered. */
  readonly #accepted = new Ledger();
  #draining = false;
  /** Set when the server gave up: the answer of every request accepted from then on. */
  #abandoned: ShoalError | undefined;
  #drained: (() => void) | undefined;
  /** When the last request arrived (performance.now() clock). */
  #lastArrival = 0;

  /** `delegates` make the handlers of path prefixes, with what the front lends them. */
  constructor(routes: Map<string, Route>, config: ServerConfig, health: Health, metrics: Metrics, docs: ApiDocs, logger: Logger, delegates: ((intake: Intake) => Delegate)[] = []) {
    this.#routes = routes;
    this.access = new AccessPolicy(config);
    this.#log = logger;
    this.#config = config;
    this.health = health;
    this.metrics = metrics;
    this.docs = docs;
    this.#delegates = delegates.map((make) => make(this));
    this.#budget = new ByteBudget(config.maxInflightBytes);
    this.accessLog = config.accessLog && config.accessLogSample > 0 ? new AccessLog(logger, config.accessLogSample) : undefined;
    const handle: Handle = (req, res, requestId, arrival) => this.#handle(req, res, requestId, arrival);
    this.#listener = isBun() ? new BunListener(config, handle) : new NodeListener(config, handle);
  }

  /** The runtime's HTTP server the front runs on. */
  get server(): Listener["name"] {
    return this.#listener.name;
  }

  /** Requests accepted and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Request body bytes held now (`--max-inflight-bytes` is the most). */
  get bytesInFlight(): number {
    return this.#budget.held;
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Starts listening; rejects with a one-line message when the port cannot be had. */
  listen(): Promise<AddressInfo> {
    return this.#listener.listen();
  }

  /**
   * Stops taking requests and resolves once every accepted request is answered and none has
   * arrived for {@link QUIET_MS}, or after `timeoutMs`, when those still open are answered 503.
   * Meanwhile new requests get a 503 that ends their connection, rather than a connection
   * refused, or reset under a client still sending on it.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#draining = true;
    return new Promise((resolve) => {
      // What is unanswered then (a stream, say) gets a 503 or an error event, and its generator
      // is aborted, rather than holding its worker and the exit for up to --stream-timeout.
      const timer = setTimeout(() => {
        this.#drained = undefined;
        this.abandon(new ShoalError("SHUTTING_DOWN", "the server is shutting down"));
        resolve();
      }, timeoutMs);
      const settle = () => {
        const quietFor = performance.now() - this.#lastArrival;
        if (this.#inFlight > 0) return;
        if (quietFor < QUIET_MS) setTimeout(settle, QUIET_MS - quietFor);
        else {
          this.#drained = undefined;
          clearTimeout(timer);
          resolve();
        }
      };
      this.#drained = settle;
      settle();
    });
  }

  /**
   * The server gives up (its workers cannot start): every accepted request is answered with
   * `error` now, one whose body is still arriving gets it when the body ends, and new requests
   * are refused as while draining.
   */
  abandon(error: ShoalError): void {
    this.#draining = true;
    this.#abandoned = error;
    for (const task of this.#accepted.list()) task.fail(error);
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
    this.#lastArrival = arrival;
    try {
      this.#dispatch(req, res, requestId, arrival);
    } catch (err) {
      this.unexpected(err, res, requestId);
    }
  }

  /**
   * Answers 500 for an exception that escaped a handler, and logs it with its stack: a bug of
   * ours must cost one request, never the process.
   */
  unexpected(err: unknown, res: HttpResponse, requestId: string): void {
    this.#log.error({ requestId, err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, "request handler failed");
    if (!res.headersSent) sendError(res, requestId, new ShoalError("SERVER", "the request could not be handled"));
    else res.destroy();
  }

  /** Runs `fn` (a callback of a request's, outside the handler's own call) under {@link unexpected}. */
  guard(res: HttpResponse, requestId: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.unexpected(err, res, requestId);
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
    if (answerCors(this.access, req, res, requestId, path, route !== undefined)) return;
    if (route === undefined) {
      const delegate = this.#delegates.find(({ prefix }) => path === prefix || path.startsWith(`${prefix}/`));
      if (delegate !== undefined) delegate.handle(req, res, path, requestId, arrival);
      else serveBuiltin(path, req, res, requestId, this);
      return;
    }
    this.accept(route.path, route.stages, req, res, requestId, arrival);
  }

  /**
   * Takes a POST for `path`: refuses it while draining or when its body is empty or too large,
   * and otherwise makes its task, with its deadline, and queues it at its first step.
   */
  accept(path: string, steps: readonly Step[], req: HttpRequest, res: HttpResponse, requestId: string, arrival: number, dialect?: Dialect): void {
    const incoming: Incoming = { path, steps, req, res, requestId, arrival, dialect };
    if (req.method !== "POST") {
      // The path as the client wrote it: a V2 request's own path is its model's canonical one.
      const written = (req.url ?? path).split("?", 1)[0];
      this.#refuse(incoming, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${written}; use POST`), { allow: "POST" });
      return;
    }
    if (this.#draining) {
      this.#refuse(incoming, new ShoalError("SHUTTING_DOWN", "the server is shutting down"), { connection: "close" });
      return;
    }
    const hold = this.#budget.hold();
    receiveBody(req, {
      limit: this.#config.maxRequestSize,
      hold,
      done: (sent) =>
        decodeBody(req.headers["content-encoding"], sent, this.#config.maxRequestSize, hold, (body, error) =>
          this.guard(res, requestId, () => {
            if (body === undefined) this.#refuse(incoming, error!, undefined, hold);
            else if (body.bytes.byteLength === 0) this.#refuse(incoming, new ShoalError("EMPTY_BODY", "empty request body"), undefined, hold);
            else this.#accept(incoming, body, hold);
          }),
        ),
      refused: (error, close) => this.guard(res, requestId, () => this.#refuse(incoming, error, close ? { connection: "close" } : undefined, hold)),
    });
  }

  // Answers a route request that was not accepted, counts it, and returns its body's bytes.
  #refuse({ path, steps, arrival, res, requestId, dialect }: Incoming, error: ShoalError, headers?: OutgoingHttpHeaders, hold?: Hold): void {
    const bytesIn = hold?.bytes ?? 0;
    hold?.release();
    const bytesOut = sendFailure(res, requestId, error, dialect, headers);
    this.answered(path, error.status, arrival);
    if (this.accessLog?.sampled()) this.accessLog.write(res.req, { requestId, status: error.status, durationMs: performance.now() - arrival, bytesIn, bytesOut, route: path, steps });
  }

  answered(path: string, status: number, arrival: number, protocol: Protocol = "http"): void {
    this.metrics.answered(path, status, performance.now() - arrival, protocol);
  }

  hold(): Hold {
    return this.#budget.hold();
  }

  admit(task: Task): ShoalError | undefined {
    this.#accepted.add(task);
    this.#inFlight++;
    return this.#abandoned ?? task.start();
  }

  #accept(incoming: Incoming, body: Body, hold: Hold): void {
    const { path, req, res, requestId, arrival, dialect } = incoming;
    let request: DialectRequest | undefined;
    try {
      if (dialect?.read !== undefined) request = dialect.read(body.bytes, req);
    } catch (err) {
      if (!(err instanceof ShoalError)) throw err;
      this.#refuse(incoming, err, undefined, hold);
      return;
    }
    const steps = request?.steps ?? incoming.steps;
    const config = this.#config;
    // A request for a stream has its first chunk by --timeout; gathered or not, the whole
    // stream ends by --stream-timeout.
    const policy = steps[steps.length - 1]!.stream;
    const stream = request?.stream;
    const transport = stream === true ? "sse" : stream === false || policy === undefined ? undefined : negotiate(req.headers.accept, policy.transport);
    const timeoutMs = policy !== undefined && transport === undefined ? config.streamTimeoutMs : config.timeoutMs;
    // A request that took its whole deadline to arrive is not queued at all.
    if (performance.now() - arrival >= timeoutMs) {
      this.#refuse(incoming, new ShoalError("TIMEOUT", `no answer within ${timeoutMs} ms`), undefined, hold);
      return;
    }
    const meta = { requestId, headers: req.headers, deadline: Date.now() - (performance.now() - arrival) + timeoutMs, route: path };
    const exchange = new Exchange(this, path, arrival, res, requestId, hold, body.bytes.byteLength, dialect);
    const task = new Task(steps, meta, arrival + timeoutMs, request?.payload ?? body.bytes, request === undefined ? body.transfer : undefined, exchange);
    exchange.task = task;
    if (transport !== undefined) {
      task.streamed = true;
      const streamMs = config.streamTimeoutMs;
      exchange.stream = { transport, policy: policy ?? DEFAULT_STREAM, deadline: arrival + streamMs, timeoutMs: streamMs, keepAliveMs: config.sseKeepAliveMs, metrics: this.metrics.streams(path) };
    }
    exchange.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `no answer within ${timeoutMs} ms`)), Math.max(0, arrival + timeoutMs - performance.now()));
    res.on("close", () => task.drop());
    const refused = this.admit(task);
    if (refused !== undefined) task.fail(refused);
  }

  /** The task of an accepted request has settled. */
  released(task: Task): void {
    this.#accepted.delete(task);
    if (--this.#inFlight === 0 && this.#drained !== undefined) this.#drained();
  }
}
