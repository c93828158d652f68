import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { ServerConfig } from "../../config.js";
import { discardBounds } from "../body.js";
import { answerClientError, httpLimits, type ClientError } from "./client-errors.js";
import { Connection } from "./connection.js";
import { requestIdOf } from "../../serving/request-id.js";
import { listenError, type Handle, type Listener } from "../listener.js";

/** The front's listener on node:http: its limits, client errors, connections and `100 Continue`. */
export class NodeListener implements Listener {
  readonly name = "node:http";
  readonly #server: Server;
  readonly #config: ServerConfig;
  readonly #connections = new Set<Connection>();

  constructor(config: ServerConfig, handle: Handle) {
    this.#config = config;
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      const requestId = requestIdOf(req.headers["x-request-id"]);
      const connection = Connection.of(req.socket);
      const arrival = connection === undefined ? performance.now() : connection.received(req, res, requestId);
      // A socket error after the answer started (a client gone mid-write) must not become an
      // unhandled 'error' event.
      res.on("error", destroyResponse);
      handle(req, res, requestId, arrival);
    };
    // node:http's own answer to a request without Host is a bare 400: the front gives its own.
    this.#server = createServer({ ...httpLimits(config), requireHostHeader: false }, onRequest);
    // net.Server closes connections past its maxConnections as soon as they are accepted.
    if (config.maxConnections > 0) this.#server.maxConnections = config.maxConnections;
    const linger = discardBounds(config.maxRequestSize);
    this.#server.on("connection", (socket: Socket) => {
      const connection = Connection.track(socket, linger);
      this.#connections.add(connection);
      socket.once("close", () => this.#connections.delete(connection));
    });
    this.#server.on("clientError", (err: ClientError, socket: Socket) => answerClientError(err, socket, config));
    // A client that sent `Expect: 100-continue` waits for it before sending its body: it gets it
    // once its body is read, and a request answered without reading it is answered at once.
    this.#server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
      req.once("resume", () => {
        if (!res.headersSent) res.writeContinue();
      });
      onRequest(req, res);
    });
  }

  get arriving(): number {
    let heads = 0;
    for (const connection of this.#connections) if (connection.arriving) heads++;
    return heads;
  }

  listen(): Promise<AddressInfo> {
    const { port, address } = this.#config;
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => reject(listenError(err, address, port));
      this.#server.once("error", onError);
      this.#server.listen(port, address, () => {
        this.#server.removeListener("error", onError);
        resolve(this.#server.address() as AddressInfo);
      });
    });
  }

  close(lingerMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#server.closeAllConnections(), lingerMs);
      this.#server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      this.#server.closeIdleConnections();
    });
  }
}

// One listener for every response, rather than a closure per request.
function destroyResponse(this: ServerResponse): void {
  this.destroy();
}
