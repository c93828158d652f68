import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** The latest request received on a connection, with what its answer needs. */
export interface Received {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
}

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
  /** The latest request received, once its head has been parsed. */
  latest: Received | undefined;
  // performance.now() at the first byte of the request being received, once it has come.
  #began: number | undefined;

  private constructor() {}

  /**
   * Tracks a new connection of a node:http server (from its 'connection' event, after node:http
   * has set the socket up). The time of each request's first byte comes from node:http's parser,
   * which calls its message-begin slot there (the clock of Node's own headersTimeout). That slot
   * is not public API: where it is missing, a request arrives when its head has been parsed.
   */
  static track(socket: Socket): Connection {
    const connection = new Connection();
    connections.set(socket, connection);
    const parser = (socket as Socket & { parser?: Parser }).parser;
    const slot = parser?.constructor.kOnMessageBegin;
    if (parser !== undefined && typeof slot === "number") parser[slot] = () => (connection.#began = performance.now());
    return connection;
  }

  /** The connection of `socket`, if it is tracked. */
  static of(socket: Socket): Connection | undefined {
    return connections.get(socket);
  }

  /** Records a request whose head has just been parsed, and says when it arrived (performance.now()). */
  received(latest: Received): number {
    this.latest = latest;
    const arrival = this.#began ?? performance.now();
    this.#began = undefined;
    return arrival;
  }
}
