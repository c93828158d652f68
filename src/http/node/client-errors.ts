import { randomUUID } from "node:crypto";
import { STATUS_CODES, type ServerOptions } from "node:http";
import type { Socket } from "node:net";
import type { ServerConfig } from "../../config.js";
import { ShoalError } from "../../errors.js";
import { JSON_TYPE, sendError } from "../send.js";
import { failBody } from "../body.js";
import { Connection } from "./connection.js";

/** An error of node:http's parser, with the piece of input it was parsing. */
export type ClientError = NodeJS.ErrnoException & { rawPacket?: Buffer };

/**
 * Answers a request node:http gave up on (malformed, or late: its head past
 * `--headers-timeout`, or the whole of it past `--request-timeout`), then closes the connection.
 * The answer goes out only where it cannot be taken for the answer to another request.
 */
export function answerClientError(err: ClientError, socket: Socket, config: ServerConfig): void {
  const connection = Connection.of(socket);
  if (err.code === "ECONNRESET" || connection === undefined) {
    socket.destroy();
    return;
  }
  // node:http parses what a closing connection still receives, and fails again on each piece.
  if (connection.closing) return;
  const { latestReq: req, latestRes: res, latestId: requestId } = connection;
  if (req === undefined || res === undefined || req.complete) {
    // A new request's head. While an answer is still owed on the connection, one written now
    // would be taken for it: the connection is closed without one.
    if (res === undefined || res.writableFinished) answerRaw(connection, socket, errorOf(err, "headers", config), isHead(err.rawPacket));
    else socket.destroy();
    return;
  }
  // The body of the latest request: its reader refuses it (its route counts the answer) and
  // returns its bytes; without a reader, the answer is ours.
  const error = errorOf(err, "body", config);
  failBody(req, error);
  if (!res.headersSent) sendError(res, requestId, error, { connection: "close" });
  else if (!res.writableEnded) socket.destroy();
  else if (res.writableFinished) connection.close();
  else res.once("finish", () => connection.close());
}

// The answer to a node:http client error, in the part of the request where it happened.
function errorOf(err: NodeJS.ErrnoException, part: "headers" | "body", config: ServerConfig): ShoalError {
  if (err.code === "HPE_HEADER_OVERFLOW") return new ShoalError("HEADERS_TOO_LARGE");
  if (err.code !== "ERR_HTTP_REQUEST_TIMEOUT") return new ShoalError("BAD_REQUEST", `malformed HTTP request (${err.code ?? err.message})`);
  const ms = part === "headers" ? headersTimeoutMs(config) : config.requestTimeoutMs;
  return new ShoalError("TIMEOUT", `the request ${part} did not arrive within ${ms} ms`);
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
export function httpLimits(config: ServerConfig): ServerOptions {
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
