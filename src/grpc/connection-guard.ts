import { constants, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";

/** What a gRPC connection is held to before its first call, and how often its client may ping it idle. */
export interface ConnectionLimits {
  /** Time a connection has to open its first call (send HEADERS), in ms (`--headers-timeout`). */
  headersTimeoutMs: number;
  /** Least time between a client's pings while no call is open, in ms (`--grpc-min-ping-interval`; 0: any). */
  grpcMinPingIntervalMs: number;
}

/** Pings sooner than the least interval that a connection is forgiven; the next one closes it. */
export const MAX_PING_STRIKES = 2;

/**
 * Holds each HTTP/2 connection of the gRPC port to what the REST port holds its connections to,
 * where @grpc/grpc-js does not: a connection that has not opened a call within
 * `--headers-timeout` of being accepted is closed (a TCP connection that never sends a byte
 * would otherwise be kept for good, and `--max-connections` of them would shut the port), and a
 * client that pings a connection with no call open more often than `--grpc-min-ping-interval`
 * is told GOAWAY `ENHANCE_YOUR_CALM` after {@link MAX_PING_STRIKES} strikes, as gRPC's own
 * servers do. The idle limit, the keep-alive pings and the limit of calls per connection are
 * grpc-js's own options (grpc-front.ts).
 *
 * A connection gets its HTTP/2 session (node:http2's and grpc-js's state, timers and SETTINGS)
 * only once its first byte has come: one that never sends a byte costs the server its socket and
 * one timer, and is destroyed without a word. `listener` is a plain (not TLS) HTTP/2 server.
 * Returns what ends the connections still waiting for their first byte, for a shutdown (grpc-js
 * knows only the sessions).
 */
export function guardConnections(listener: Http2Server, limits: ConnectionLimits): () => void {
  // node:http2 makes a connection's session in its own listener of "connection" (and emits
  // "session" from it): that listener is called here, once the first byte has come, and reads
  // the bytes already come from the socket.
  let opening: ServerHttp2Session | undefined;
  listener.on("session", (session: ServerHttp2Session) => {
    opening = session;
    let open = 0;
    let lastPing = -Infinity;
    let strikes = 0;
    session.on("stream", (stream: { once(event: "close", fn: () => void): unknown }) => {
      open++;
      strikes = 0;
      stream.once("close", () => open--);
    });
    // Not every runtime's node:http2 tells of the pings it answers; there, none is counted.
    session.on("ping", () => {
      const now = performance.now();
      const soon = open === 0 && now - lastPing < limits.grpcMinPingIntervalMs;
      lastPing = now;
      if (!soon || ++strikes <= MAX_PING_STRIKES) return;
      // With no call open, closing ends the connection once the GOAWAY is out.
      session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from("too_many_pings"));
      session.close();
    });
  });
  const makers = listener.listeners("connection") as ((socket: Socket) => void)[];
  listener.removeAllListeners("connection");
  const waiting = new Set<Socket>();
  // A reset before the session takes the socket over is no one's error.
  const ignore = () => {};
  listener.on("connection", (socket: Socket) => {
    waiting.add(socket);
    socket.on("error", ignore);
    const silent = setTimeout(() => socket.destroy(), limits.headersTimeoutMs);
    silent.unref();
    socket.once("close", () => {
      waiting.delete(socket);
      clearTimeout(silent);
    });
    socket.once("readable", () => {
      waiting.delete(socket);
      socket.off("error", ignore);
      // Readable with nothing to read: the client closed without a byte.
      if (socket.destroyed || socket.readableLength === 0) return void socket.destroy();
      for (const make of makers) make.call(listener, socket);
      const session = opening;
      opening = undefined;
      // The session's socket is a proxy that cannot be destroyed, and a client that never reads
      // would hold a socket that is only ended: the timer destroys the raw socket.
      session?.once("stream", () => clearTimeout(silent));
    });
  });
  return () => {
    for (const socket of waiting) socket.destroy();
  };
}
