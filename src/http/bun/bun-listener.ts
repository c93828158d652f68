import type { AddressInfo } from "node:net";
import type { ServerConfig } from "../../config.js";
import { FetchRequest } from "../fetch/fetch-request.js";
import { FetchResponse } from "../fetch/fetch-response.js";
import type { IncomingHttpHeaders } from "../http-message.js";
import { Watch, type BunTimeouts } from "./watch.js";
import { listenError, type Handle, type Listener } from "../listener.js";
import { requestIdOf } from "../../serving/request-id.js";

// What Shoal uses of Bun's own API (no type package needed at build time).
interface BunServer extends BunTimeouts {
  readonly port: number;
  readonly hostname: string;
  stop(closeActiveConnections?: boolean): Promise<void>;
}
// Bun's Headers read into an object of lower-cased names at once.
interface BunHeaders extends Headers {
  toJSON(): IncomingHttpHeaders;
}
interface BunServeOptions {
  port: number;
  hostname: string;
  idleTimeout: number;
  maxRequestBodySize: number;
  development: boolean;
  fetch(request: Request, server: BunServer): Response | Promise<Response>;
  error(err: Error): Response;
}
interface BunGlobal {
  serve(options: BunServeOptions): BunServer;
}

/** Whether this process runs on Bun. */
export function isBun(): boolean {
  return bun() !== undefined;
}

function bun(): BunGlobal | undefined {
  return (globalThis as { Bun?: BunGlobal }).Bun;
}

// Bun's longest idle timeout, in seconds.
const MAX_IDLE_S = 255;

/**
 * The front's listener on Bun.serve, Bun's native HTTP server: each Request becomes a
 * {@link FetchRequest} and {@link FetchResponse} for the same handlers as node:http's, and the
 * answer they write becomes the Response.
 *
 * What node:http does by flags and Bun does its own way: Bun parses requests and closes silent
 * connections after `--keep-alive-timeout`, or the request's own deadline while one is under
 * way and until its answer. `--headers-timeout`, `--request-timeout` and `--max-connections` are node:http's only.
 */
export class BunListener implements Listener {
  readonly name = "Bun.serve";
  // Bun hands a request over once its head is in, and tells nothing before.
  readonly arriving = 0;
  readonly #config: ServerConfig;
  readonly #handle: Handle;
  #server: BunServer | undefined;

  constructor(config: ServerConfig, handle: Handle) {
    this.#config = config;
    this.#handle = handle;
  }

  listen(): Promise<AddressInfo> {
    const config = this.#config;
    const { port, address } = config;
    // A request under way may be silent up to its deadline (a stream's whole one included).
    const busyS = Math.min(MAX_IDLE_S, Math.ceil(Math.max(config.timeoutMs, config.streamTimeoutMs) / 1000) + 1);
    const idleS = Math.min(MAX_IDLE_S, Math.ceil(config.keepAliveTimeoutMs / 1000));
    let watch: Watch | undefined;
    try {
      this.#server = bun()!.serve({
        port,
        hostname: address,
        idleTimeout: idleS,
        // The front's own body rules apply (the 413, the budget's 429, dropping a refused body).
        maxRequestBodySize: Number.MAX_SAFE_INTEGER,
        development: false,
        fetch: (request, server) => {
          const req = new FetchRequest(request, performance.now(), (request.headers as BunHeaders).toJSON());
          const res = new FetchResponse(req, (watch ??= new Watch(server, busyS, idleS)));
          this.#handle(req, res, requestIdOf(req.headers["x-request-id"]), req.arrival);
          if (!res.writableEnded) watch.add(req);
          return res.answer;
        },
        // Handlers never throw (the front guards them): this is Bun's last resort.
        error: () => new Response(JSON.stringify({ error: "server error: the request could not be handled" }), { status: 500, headers: { "content-type": "application/json" } }),
      });
    } catch (err) {
      return Promise.reject(listenError(err as NodeJS.ErrnoException, address, port));
    }
    const family = address.includes(":") ? "IPv6" : "IPv4";
    return Promise.resolve({ port: this.#server.port, address, family });
  }

  close(lingerMs: number): Promise<void> {
    const server = this.#server;
    if (server === undefined) return Promise.resolve();
    const timer = setTimeout(() => void server.stop(true), lingerMs);
    return server.stop(false).then(() => clearTimeout(timer));
  }
}
