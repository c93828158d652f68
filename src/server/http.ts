import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server as NodeServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/registry.js";
import { Task, type Reply, type Route } from "../scheduling/task.js";
import { AccessPolicy, corsScope, isPreflight, type CorsScope } from "./access.js";
import { readBody } from "./body.js";
import type { ApiDocs, Page } from "./docs.js";

/** A handler the front gives every request under its prefix (the V2 protocol under `/v2`). */
export interface Delegate {
  /** Paths equal to it or under it (`/v2`, `/v2/...`) are its own. */
  readonly prefix: string;
  handle(req: IncomingMessage, res: ServerResponse, path: string, requestId: string): void;
}

/** Queues an accepted task, or says why it cannot be queued. */
export type Admit = (task: Task) => ShoalError | undefined;

/** What the HTTP front asks the server about its health. */
export interface Health {
  /** Why the server is not ready, or undefined when it is. */
  notReady(): string | undefined;
}

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
    this.#server = createServer((req, res) => this.#handle(req, res));
    this.#server.on("clientError", answerMalformed);
  }

  /** Requests accepted and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
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
    // A socket error after the answer started (a client gone mid-write) must not become an
    // unhandled 'error' event.
    res.on("error", () => res.destroy());
    try {
      this.#dispatch(req, res, requestId);
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

  #dispatch(req: IncomingMessage, res: ServerResponse, requestId: string): void {
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
      for (const [name, value] of Object.entries(this.access.corsHeaders(origin, scope) ?? {})) res.setHeader(name, value);
    }
    if (route === undefined) {
      const prefix = this.#delegate?.prefix;
      if (prefix !== undefined && (path === prefix || path.startsWith(`${prefix}/`))) this.#delegate!.handle(req, res, path, requestId);
      else this.#builtin(path, req, res, requestId);
      return;
    }
    this.post(route, req, res, requestId, (task) => route.stages[0]!.admit(task));
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
  post(route: Route, req: IncomingMessage, res: ServerResponse, requestId: string, admit: Admit): void {
    const path = route.path;
    const arrival = performance.now();
    if (req.method !== "POST") {
      this.#refuse(route, arrival, res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use POST`), { allow: "POST" });
      return;
    }
    if (this.#draining) {
      this.#refuse(route, arrival, res, requestId, new ShoalError("SHUTTING_DOWN", "the server is shutting down"), { connection: "close" });
      return;
    }
    readBody(
      req,
      this.#config.maxRequestSize,
      (body) =>
        this.guard(res, requestId, () => {
          if (body.bytes.byteLength === 0) this.#refuse(route, arrival, res, requestId, new ShoalError("EMPTY_BODY", "empty request body"));
          else this.#accept(route, req, res, requestId, arrival, body.bytes, body.transfer, admit);
        }),
      (close) =>
        this.guard(res, requestId, () => {
          const error = new ShoalError("BODY_TOO_LARGE", `the limit is ${this.#config.maxRequestSize} bytes`);
          this.#refuse(route, arrival, res, requestId, error, close ? { connection: "close" } : undefined);
        }),
    );
  }

  // Answers a route request that was not accepted, and counts it.
  #refuse(route: Route, arrival: number, res: ServerResponse, requestId: string, error: ShoalError, headers?: OutgoingHttpHeaders): void {
    sendError(res, requestId, error, headers);
    this.answered(route, error.status, arrival);
  }

  /** Counts an answer to a route request. */
  answered(route: Route, status: number, arrival: number): void {
    this.#metrics.answered(route.path, status, performance.now() - arrival);
  }

  #accept(route: Route, req: IncomingMessage, res: ServerResponse, requestId: string, arrival: number, bytes: Uint8Array, transfer: ArrayBuffer[] | undefined, admit: Admit): void {
    const timeoutMs = this.#config.timeoutMs;
    const meta = { requestId, headers: req.headers, deadline: Date.now() - (performance.now() - arrival) + timeoutMs, route: route.path };
    const exchange = new Exchange(this, route, arrival, res, requestId);
    const task = new Task(route, meta, arrival + timeoutMs, bytes, transfer, exchange);
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
    this.front.released(this.task);
  }
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

// A request Node cannot parse still gets a JSON error (with an id to quote) before the socket closes.
function answerMalformed(err: NodeJS.ErrnoException, socket: import("node:net").Socket): void {
  if (!socket.writable || err.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
  const error = tooLarge ? new ShoalError("HEADERS_TOO_LARGE") : new ShoalError("BAD_REQUEST", `malformed HTTP request (${err.code ?? err.message})`);
  const body = JSON.stringify({ error: error.publicMessage });
  socket.end(
    `HTTP/1.1 ${error.status} ${tooLarge ? "Request Header Fields Too Large" : "Bad Request"}\r\n` +
      `content-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${randomUUID()}\r\nconnection: close\r\n\r\n${body}`,
  );
}
