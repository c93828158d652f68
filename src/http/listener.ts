import type { AddressInfo } from "node:net";
import type { HttpRequest, HttpResponse } from "./http-message.js";

/**
 * What a listener gives every request: its id (the client's `x-request-id`, or a new one) and its
 * arrival, the first byte, on the performance.now() clock.
 */
export type Handle = (req: HttpRequest, res: HttpResponse, requestId: string, arrival: number) => void;

/**
 * The runtime's HTTP server under the front: it owns the port and the connections, and hands
 * each request to the front. node:http's is {@link NodeListener}; Bun's own, Bun.serve, is
 * {@link BunListener}.
 */
export interface Listener {
  /** The runtime's server it runs on, as the start-up log names it. */
  readonly name: "node:http" | "Bun.serve";
  /** Requests whose first byte has come and whose head is not yet handed over (0 where the server does not tell). */
  readonly arriving: number;
  /** Starts listening; rejects with a one-line message when the port cannot be had. */
  listen(): Promise<AddressInfo>;
  /**
   * Releases the port and closes every connection: idle ones at once, one with an answer still
   * going out once it is sent, and any left after `lingerMs`.
   */
  close(lingerMs: number): Promise<void>;
}

/** The one-line reason a port could not be had. */
export function listenError(err: NodeJS.ErrnoException, address: string, port: number): Error {
  const why =
    err.code === "EADDRINUSE"
      ? `${address}:${port} is already in use; choose another port with --port`
      : err.code === "EACCES"
        ? `no permission to listen on ${address}:${port}`
        : `cannot listen on ${address}:${port}: ${err.message}`;
  return new Error(why);
}
