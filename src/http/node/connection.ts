import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Linger } from "../body.js";

// node:http's parser as this module uses it: the function slot it calls at the first byte of
// each request, numbered by a static of its class.
interface Parser {
  [slot: number]: unknown;
  constructor: { kOnMessageBegin?: unknown };
}

const connections = new WeakMap<Socket, Connection>();

/**
 * What the front knows of one client connection: when the request now being received began,
 * and the latest request received.
 *
 * A request arrives with its first byte, not when its head has been parsed: a client that takes
 * a second over its headers has used a second of its deadline. On a connection kept alive, the
 * next request begins with its own first byte, however long the connection was idle before.
 */
export class Connection {
  /** The latest request received, once its head has been parsed, with its answer and id (fields, not an object per request). */
  latestReq: IncomingMessage | undefined;
  latestRes: ServerResponse | undefined;
  latestId = "";
  readonly #socket: Socket;
  readonly #linger: Linger;
  // performance.now() at the first byte of the request being received, once it has come.
  #began: number | undefined;
  #closing = false;

  private constructor(socket: Socket, linger: Linger) {
    this.#socket = socket;
    this.#linger = linger;
  }

  /**
   * Tracks a new connection of a node:http server (from its 'connection' event, after node:http
   * has set the socket up). The time of each request's first byte comes from node:http's parser,
   * which calls its message-begin slot there (the clock of Node's own headersTimeout). That slot
   * is not public API: where it is missing, a request arrives when its head has been parsed.
   *
   * node:http closes a connection after an answer that ends it with the socket's destroySoon(),
   * which destroys it as soon as the answer is written: a client still sending its body then
   * gets a reset, which can overtake the answer. On a tracked socket it is {@link close}.
   */
  static track(socket: Socket, linger: Linger): Connection {
    const connection = new Connection(socket, linger);
    connections.set(socket, connection);
    socket.destroySoon = () => connection.close();
    const parser = (socket as Socket & { parser?: Parser }).parser;
    const slot = parser?.constructor.kOnMessageBegin;
    if (parser !== undefined && typeof slot === "number") parser[slot] = () => (connection.#began = performance.now());
    return connection;
  }

  /** The connection of `socket`, if it is tracked. */
  static of(socket: Socket): Connection | undefined {
    return connections.get(socket);
  }

  /** Whether a request's first byte has come and its head not yet: a request is arriving. */
  get arriving(): boolean {
    return this.#began !== undefined && !this.#closing && !this.#socket.destroyed;
  }

  /** Whether the connection is closing: its last answer is written or being written. */
  get closing(): boolean {
    return this.#closing;
  }

  /**
   * Closes the connection once what is written to it has gone out, without losing that to a
   * reset: the server's side is ended, and what the client still sends is read and dropped, for
   * the linger's time and bytes at most, before the connection is destroyed. A client that
   * closes its own side ends it at once.
   */
  close(): void {
    const socket = this.#socket;
    if (this.#closing || socket.destroyed) return;
    this.#closing = true;
    const { ms, bytes } = this.#linger;
    let dropped = 0;
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.once("close", () => clearTimeout(timer));
    // A 'data' listener takes the socket back from node:http's native parser; node:http goes on
    // parsing what arrives, and drops the rest of a request body nobody reads.
    socket.on("data", (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > bytes) socket.destroy();
    });
    socket.end();
  }

  /** Records a request whose head has just been parsed, and says when it arrived (performance.now()). */
  received(req: IncomingMessage, res: ServerResponse, requestId: string): number {
    this.latestReq = req;
    this.latestRes = res;
    this.latestId = requestId;
    const arrival = this.#began ?? performance.now();
    this.#began = undefined;
    return arrival;
  }
}
