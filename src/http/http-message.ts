import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

export type { IncomingHttpHeaders, OutgoingHttpHeaders };

/**
 * A request as a front hands it to the handlers: what they read of node:http's IncomingMessage,
 * which is one; the Bun front makes its own. The body arrives as `data` events (Buffer chunks),
 * then `end`; `close` comes when the client leaves.
 */
export interface HttpRequest {
  readonly method?: string;
  /** The path and query, as the client wrote them. */
  readonly url?: string;
  /** Lower-cased names. */
  readonly headers: IncomingHttpHeaders;
  readonly httpVersion: string;
  /** The whole body has been received. */
  readonly complete: boolean;
  /** Its connection: destroying it ends the request and every other on that connection. */
  readonly socket: { destroy(): void };
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  removeListener(event: string | symbol, listener: (...args: any[]) => void): this;
  emit(event: string | symbol, ...args: any[]): boolean;
}

/**
 * The answer to a request, as handlers write it: what they use of node:http's ServerResponse,
 * which is one. `close` comes once the answer is sent or its client has left; `drain` when a
 * backlog of written chunks has gone out.
 */
export interface HttpResponse {
  readonly req: HttpRequest;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  /** Bytes written and not yet taken by the client. */
  readonly writableLength: number;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  /** Set to false, the answer says `connection: close` and ends its connection. */
  shouldKeepAlive: boolean;
  writeHead(status: number, headers?: OutgoingHttpHeaders): this;
  setHeader(name: string, value: string | number | readonly string[]): this;
  write(chunk: Uint8Array | string): boolean;
  end(chunk?: Uint8Array | string): this;
  /** Sends `100 Continue` to a client that waits for it before sending its body. */
  writeContinue(): void;
  /** Ends the answer and its connection at once, without a word to the client. */
  destroy(): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}
