import { randomUUID } from "node:crypto";
import { createServer, STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders, type Server as NodeServer, type ServerOptions, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/registry.js";
import { Task, type Reply, type Route } from "../scheduling/task.js";
import { AccessPolicy, corsScope, isPreflight, type CorsScope } from "./access.js";
import { BODY_FAILED, discardBounds, receiveBody, type Body } from "./body.js";
import { ByteBudget, type Hold } from "./budget.js";
import { Connection, type Linger } from "./connection.js";
import type { ApiDocs, Page } from "./docs.js";

/** A handler the front gives every request under its prefix (the V2 protocol under `/v2`). */
export interface Delegate {
  /** Paths equal to it or under it (`/v2`, `/v2/...`) are its own. */
  readonly prefix: string;
  /** `arrival`: the request's first byte, on the performance.now() clock. */
  handle(req: IncomingMessage, res: ServerResponse, path: string, requestId: string, arrival: number): void;
}

/** Queues an accepted task, or says why it cannot be queued. */
export type Admit = (task: Task) => ShoalError | undefined;

/** What the HTTP front asks the server about its health. */
export interface Health {
  /** Why the server is not ready, or undefined when it is. */
  notReady(): string | undefined;
}

/** An error of node:http's parser, with the piece of input it was parsing. */
type ClientError = NodeJS.ErrnoException & { rawPacket?: Buffer };

const JSON_TYPE = "application/json";
const GET_ONLY = "GET, HEAD";

// A client's request id is echoed only when it is short and printable; otherwise we make one.
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * The HTTP front: routing, body limits, deadlines, and the answer to every request. It never
 * runs user code nor decodes bodies: it hands bytes to the route's first stage.
 */
export class HttpFront {
  /** Who may load and unload models, and which origins get CORS headers. */
  readonly access: AccessPolicy;
  readonly #server: NodeServer;
  readonly #routes: Map<string, Route>;
  readonly #config: ServerConfig;
  readonly #health: Health;
  readonly #metrics: Metrics;
  readonly #docs: ApiDocs;
  readonly #delegate: Delegate | undefined;
  readonly #log: Logger;
  readonly #budget: ByteBudget;
  // When each request being handled arrived: its first byte (performance.now()).
  #inFlight = 0;
  /** The tasks of requests accepted and not yet answered. */
  readonly #accepted = new Set<Task>();
  #draining = false;
  /** Set when the server gave up: the answer of every request accepted from then on. */
  #abandoned: ShoalError | undefined;
  #drained: (() => void) | undefined;

  constructor(routes: Map<string, Route>, config: ServerConfig, health: Health, metrics: Metrics, docs: ApiDocs, logger: Logger, delegate?: Delegate) {
    this.#routes = routes;
    this.access = new AccessPolicy(config);
    this.#log = logger;
    this.#delegate = delegate;
    this.#config = config;
    this.#health = health;
    this.#metrics = metrics;
    this.#docs = docs;
    this.#budget = new ByteBudget(config.maxInflightBytes);
    // node:http's own answer to a request without Host is a bare 400: the front gives its own.
    this.#server = createServer({ ...httpLimits(config), requireHostHeader: false }, (req, res) => this.#handle(req, res));
    // net.Server closes connections past its maxConnections as soon as they are accepted.
    if (config.maxConnections > 0) this.#server.maxConnections = config.maxConnections;
    const linger: Linger = discardBounds(config.maxRequestSize);
    this.#server.on("connection", (socket: Socket) => Connection.track(socket, linger));
    this.#server.on("clientError", (err: ClientError, socket: Socket) => this.#clientError(err, socket));
    // A client that sent `Expect: 100-continue` waits for it before sending its body: it gets it
    // once its body is read, and a request answered without reading it is answered at once.
    this.#server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
      req.once("resume", () => {
        if (!res.headersSent) res.writeContinue();
      });
      this.#handle(req, res);
    });
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
    const { port, address } = this.#config;
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        const why =
          err.code === "EADDRINUSE"
            ? `${address}:${port} is already in use; choose another port with --port`
            : err.code === "EACCES"
              ? `no permission to listen on ${address}:${port}`
              : `cannot listen on ${address}:${port}: ${err.message}`;
        reject(new Error(why));
      };
      this.#server.once("error", onError);
      this.#server.listen(port, address, () => {
        this.#server.removeListener("error", onError);
        resolve(this.#server.address() as AddressInfo);
      });
    });
  }

  /**
   * Stops taking requests and resolves when every accepted request is answered, or after
   * `timeoutMs`. The port stays open meanwhile, so new requests and probes get a clear 503
   * rather than a refused connection.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#draining = true;
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#drained = () => {
        clearTimeout(timer);
        resolve();
      };
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
    for (const task of this.#accepted) task.fail(error);
  }

  /** Closes every connection and releases the port. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const header = req.headers["x-request-id"];
    const requestId = typeof header === "string" && REQUEST_ID.test(header) ? header : randomUUID();
    const connection = Connection.of(req.socket);
    const arrival = connection === undefined ? performance.now() : connection.received({ req, res, requestId });
    // A socket error after the answer started (a client gone mid-write) must not become an
    // unhandled 'error' event.
    res.on("error", destroyResponse);
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
  unexpected(err: unknown, res: ServerResponse, requestId: string): void {
    this.#log.error({ requestId, err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, "request handler failed");
    if (!res.headersSent) sendError(res, requestId, new ShoalError("SERVER", "the request could not be handled"));
    else res.destroy();
  }

  /** Runs `fn` (a callback of a request's, outside the handler's own call) under {@link unexpected}. */
  guard(res: ServerResponse, requestId: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.unexpected(err, res, requestId);
    }
  }

  /**
   * Answers a request node:http gave up on (malformed, or late: its head past
   * `--headers-timeout`, or the whole of it past `--request-timeout`), then closes the connection.
   * The answer goes out only where it cannot be taken for the answer to another request.
   */
  #clientError(err: ClientError, socket: Socket): void {
    const connection = Connection.of(socket);
    if (err.code === "ECONNRESET" || connection === undefined) {
      socket.destroy();
      return;
    }
    // node:http parses what a closing connection still receives, and fails again on each piece.
    if (connection.closing) return;
    const latest = connection.latest;
    if (latest === undefined || latest.req.complete) {
      // A new request's head. While an answer is still owed on the connection, one written now
      // would be taken for it: the connection is closed without one.
      if (latest === undefined || latest.res.writableFinished) answerRaw(connection, socket, this.#clientErrorOf(err, "headers"), isHead(err.rawPacket));
      else socket.destroy();
      return;
    }
    // The body of the latest request: its reader refuses it (its route counts the answer) and
    // returns its bytes; without a reader, the answer is ours.
    const { req, res, requestId } = latest;
    const error = this.#clientErrorOf(err, "body");
    req.emit(BODY_FAILED, error);
    if (!res.headersSent) sendError(res, requestId, error, { connection: "close" });
    else if (!res.writableEnded) socket.destroy();
    else if (res.writableFinished) connection.close();
    else res.once("finish", () => connection.close());
  }

  // The answer to a node:http client error, in the part of the request where it happened.
  #clientErrorOf(err: NodeJS.ErrnoException, part: "headers" | "body"): ShoalError {
    if (err.code === "HPE_HEADER_OVERFLOW") return new ShoalError("HEADERS_TOO_LARGE");
    if (err.code !== "ERR_HTTP_REQUEST_TIMEOUT") return new ShoalError("BAD_REQUEST", `malformed HTTP request (${err.code ?? err.message})`);
    const ms = part === "headers" ? headersTimeoutMs(this.#config) : this.#config.requestTimeoutMs;
    return new ShoalError("TIMEOUT", `the request ${part} did not arrive within ${ms} ms`);
  }

  #dispatch(req: IncomingMessage, res: ServerResponse, requestId: string, arrival: number): void {
    if (req.httpVersion === "1.1" && req.headers.host === undefined) {
      sendError(res, requestId, new ShoalError("BAD_REQUEST", "an HTTP/1.1 request must have a Host header"), { connection: "close" });
      return;
    }
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    const route = this.#routes.get(path);
    const scope = corsScope(path, route !== undefined);
    if (scope !== undefined) {
      const origin = req.headers.origin;
      if (isPreflight(req.method, origin, req.headers["access-control-request-method"])) {
        this.#preflight(res, requestId, origin, scope);
        return;
      }
      // Set before any answer is written: writeHead() merges them into every kind of answer.
      const cors = this.access.corsHeaders(origin, scope);
      if (cors !== undefined) for (const name in cors) res.setHeader(name, cors[name]!);
    }
    if (route === undefined) {
      const prefix = this.#delegate?.prefix;
      if (prefix !== undefined && (path === prefix || path.startsWith(`${prefix}/`))) this.#delegate!.handle(req, res, path, requestId, arrival);
      else this.#builtin(path, req, res, requestId);
      return;
    }
    this.post(route, req, res, requestId, arrival, (task) => route.stages[0]!.admit(task));
  }

  // A CORS preflight: 204 with the CORS headers for an allowed origin, else 403 without them.
  #preflight(res: ServerResponse, requestId: string, origin: string, scope: CorsScope): void {
    const answer = this.access.preflight(origin, scope);
    if (answer instanceof ShoalError) {
      sendError(res, requestId, answer);
      return;
    }
    res.writeHead(204, { ...answer, "x-request-id": requestId });
    res.end();
  }

  /**
   * Takes a POST for `route`: refuses it while draining or when its body is empty or too large,
   * and otherwise makes its task, with its deadline, and queues it with `admit`.
   */
  post(route: Route, req: IncomingMessage, res: ServerResponse, requestId: string, arrival: number, admit: Admit): void {
    if (req.method !== "POST") {
      // The path as the client wrote it: a V2 route's own path is its model's canonical one.
      const path = (req.url ?? route.path).split("?", 1)[0];
      this.#refuse(route, arrival, res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use POST`), { allow: "POST" });
      return;
    }
    if (this.#draining) {
      this.#refuse(route, arrival, res, requestId, new ShoalError("SHUTTING_DOWN", "the server is shutting down"), { connection: "close" });
      return;
    }
    const hold = this.#budget.hold();
    receiveBody(req, {
      limit: this.#config.maxRequestSize,
      hold,
      done: (body) =>
        this.guard(res, requestId, () => {
          if (body.bytes.byteLength === 0) this.#refuse(route, arrival, res, requestId, new ShoalError("EMPTY_BODY", "empty request body"), undefined, hold);
          else this.#accept(route, req, res, requestId, arrival, body, hold, admit);
        }),
      refused: (error, close) => this.guard(res, requestId, () => this.#refuse(route, arrival, res, requestId, error, close ? { connection: "close" } : undefined, hold)),
    });
  }

  // Answers a route request that was not accepted, counts it, and returns its body's bytes.
  #refuse(route: Route, arrival: number, res: ServerResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders, hold?: Hold): void {
    hold?.release();
    sendError(res, requestId, error, headers);
    this.answered(route, error.status, arrival);
  }

  /** Counts an answer to a route request. */
  answered(route: Route, status: number, arrival: number): void {
    this.#metrics.answered(route.path, status, performance.now() - arrival);
  }

  #accept(route: Route, req: IncomingMessage, res: ServerResponse, requestId: string, arrival: number, body: Body, hold: Hold, admit: Admit): void {
    const timeoutMs = this.#config.timeoutMs;
    // A request that took its whole deadline to arrive is not queued at all.
    if (performance.now() - arrival >= timeoutMs) {
      this.#refuse(route, arrival, res, requestId, new ShoalError("TIMEOUT", `no answer within ${timeoutMs} ms`), undefined, hold);
      return;
    }
    const meta = { requestId, headers: req.headers, deadline: Date.now() - (performance.now() - arrival) + timeoutMs, route: route.path };
    const exchange = new Exchange(this, route, arrival, res, requestId, hold);
    const task = new Task(route, meta, arrival + timeoutMs, body.bytes, body.transfer, exchange);
    exchange.task = task;
    this.#accepted.add(task);
    this.#inFlight++;
    exchange.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `no answer within ${timeoutMs} ms`)), Math.max(0, arrival + timeoutMs - performance.now()));
    res.on("close", () => task.drop());
    const refused = this.#abandoned ?? admit(task);
    if (refused !== undefined) task.fail(refused);
  }

  /** The task of an accepted request has settled. */
  released(task: Task): void {
    this.#accepted.delete(task);
    if (--this.#inFlight === 0 && this.#drained !== undefined) this.#drained();
  }

  #builtin(path: string, req: IncomingMessage, res: ServerResponse, requestId: string): void {
    const known = path === "/" || path === "/healthz" || path === "/readyz" || path === "/metrics" || this.#docs.serves(path);
    if (!known) {
      sendError(res, requestId, new ShoalError("NOT_FOUND", path));
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendError(res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use GET`), { allow: GET_ONLY });
      return;
    }
    if (path === "/metrics") {
      this.#metrics.text().then(
        (text) => {
          res.writeHead(200, { "content-type": this.#metrics.contentType, "content-length": Buffer.byteLength(text), "x-request-id": requestId });
          res.end(text);
        },
        (err: Error) => sendError(res, requestId, new ShoalError("SERVER", `metrics: ${err.message}`)),
      );
      return;
    }
    if (this.#docs.serves(path)) {
      this.#docs.page(path).then(
        (page) => sendPage(res, requestId, page),
        (err: ShoalError) => sendError(res, requestId, err),
      );
      return;
    }
    if (path === "/healthz") {
      // Answering at all shows the event loop turns; the process has nothing else to check.
      sendJson(res, requestId, 200, { live: true });
      return;
    }
    const reason = this.#draining ? "shutting down" : this.#health.notReady();
    if (path === "/") {
      if (this.#draining) sendError(res, requestId, new ShoalError("SHUTTING_DOWN", "the server is shutting down"));
      else sendJson(res, requestId, 200, { status: "serving" });
      return;
    }
    sendJson(res, requestId, reason === undefined ? 200 : 503, reason === undefined ? { ready: true } : { ready: false, reason });
  }
}

/** The answer side of one accepted request. */
class Exchange implements Reply {
  timer: NodeJS.Timeout | undefined;
  task!: Task;

  constructor(
    readonly front: HttpFront,
    readonly route: Route,
    readonly arrival: number,
    readonly res: ServerResponse,
    readonly requestId: string,
    // The request body's bytes, held against the budget until the task settles.
    readonly hold: Hold,
  ) {}

  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.res.destroyed) return;
    this.res.writeHead(200, { ...headers, "content-type": contentType, "content-length": body.byteLength, "x-request-id": this.requestId });
    this.res.end(body);
    this.front.answered(this.route, 200, this.arrival);
  }

  fail(error: ShoalError): void {
    sendError(this.res, this.requestId, error);
    this.front.answered(this.route, error.status, this.arrival);
  }

  release(): void {
    clearTimeout(this.timer);
    this.hold.release();
    this.front.released(this.task);
  }
}

// One listener for every response, rather than a closure per request.
function destroyResponse(this: ServerResponse): void {
  this.destroy();
}

/** Answers with `value` as JSON. */
export function sendJson(res: ServerResponse, requestId: string, status: number, value: unknown, headers?: OutgoingHttpHeaders): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value);
  res.writeHead(status, { ...headers, "content-type": JSON_TYPE, "content-length": Buffer.byteLength(body), "x-request-id": requestId });
  res.end(body);
}

function sendPage(res: ServerResponse, requestId: string, page: Page): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, { "content-type": page.contentType, "content-length": page.body.byteLength, "cache-control": page.cacheControl, "x-request-id": requestId });
  res.end(page.body);
}

/** Every error answer: the table's status and `{"error": "<prefix>: <detail>"}`. */
export function sendError(res: ServerResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders): void {
  sendJson(res, requestId, error.status, { error: error.publicMessage }, headers);
}

// Answers on the socket itself, for a request node:http never handed over (with an id to quote),
// then closes the connection: a client that kept it open would otherwise hold it for good. The
// answer to a HEAD has the headers of any other's and no body.
function answerRaw(connection: Connection, socket: Socket, error: ShoalError, head: boolean): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error: error.publicMessage });
  socket.write(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n` +
      `content-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${randomUUID()}\r\nconnection: close\r\n\r\n${head ? "" : body}`,
  );
  connection.close();
}

// Whether the request node:http gave up on is a HEAD, as far as the piece of input it was parsing
// shows. The request begins there unless its head came in pieces: it does not follow another
// request in the same piece, since it is answered only once that one's answer has gone out,
// which takes longer than parsing a piece. A head that began in an earlier piece is taken for
// another method's.
function isHead(rawPacket: Buffer | undefined): boolean {
  if (rawPacket === undefined) return false;
  let at = 0;
  // Empty lines before a request line are allowed (RFC 9112, 2.2).
  while (rawPacket[at] === 0x0d || rawPacket[at] === 0x0a) at++;
  return rawPacket.toString("latin1", at, at + 5) === "HEAD ";
}

// node:http rejects a headers timeout longer than the request timeout; a head cannot take longer
// than the whole request anyway.
function headersTimeoutMs(config: ServerConfig): number {
  return Math.min(config.headersTimeoutMs, config.requestTimeoutMs);
}

/** The node:http server options for the flags' limits. */
function httpLimits(config: ServerConfig): ServerOptions {
  const headersTimeout = headersTimeoutMs(config);
  return {
    headersTimeout,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    // node:http looks for late requests this often (30 s by default): a fraction of the
    // shortest timeout, so that a late request is answered soon after its time is up.
    connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(headersTimeout / 4))),
  };
}
