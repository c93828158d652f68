/**
 * The door's {@link HttpResponse} that becomes a Fetch API `Response`, for a runtime whose HTTP
 * server speaks the Fetch API: the answer to one {@link FetchRequest}.
 */
import { EventEmitter } from "node:events";
import type { HttpResponse, OutgoingHttpHeaders } from "../http-message.js";
import type { FetchRequest, RequestWatch } from "./fetch-request.js";

/**
 * A Response being written: the handlers' `writeHead` and `end` make it whole; a `write` before
 * `end` starts it as a stream of the chunks written, whose backlog is `writableLength`. Its head
 * is written once: headers set or a head written after that change nothing, and neither does
 * anything written after its end (where node:http's response would throw or fail).
 */
export class FetchResponse extends EventEmitter implements HttpResponse {
  readonly req: FetchRequest;
  /** The Response, once its head is known. */
  readonly answer: Promise<Response>;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  shouldKeepAlive = true;
  #destroyed = false;
  #status = 200;
  #headers: Record<string, string> = {};
  #resolve!: (response: Response) => void;
  #reject!: (err: Error) => void;
  #stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  #closed = false;

  readonly #watch: RequestWatch;

  constructor(req: FetchRequest, watch: RequestWatch) {
    super();
    this.req = req;
    this.#watch = watch;
    this.answer = new Promise<Response>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    req.once("close", () => this.#close());
  }

  get destroyed(): boolean {
    return this.#destroyed || this.req.gone;
  }

  get writableLength(): number {
    const stream = this.#stream;
    // A byte-counting queue's desired size is its high-water mark less what waits in it.
    return stream === undefined ? 0 : Math.max(0, STREAM_HIGH_WATER - (stream.desiredSize ?? 0));
  }

  setHeader(name: string, value: string | number | readonly string[]): this {
    if (this.headersSent) return this;
    this.#headers[name.toLowerCase()] = headerValue(value);
    return this;
  }

  writeHead(status: number, headers?: OutgoingHttpHeaders): this {
    if (this.headersSent) return this;
    this.#status = status;
    if (headers !== undefined) {
      for (const name in headers) {
        const value = headers[name];
        if (value !== undefined) this.#headers[name.toLowerCase()] = headerValue(value);
      }
    }
    this.headersSent = true;
    return this;
  }

  write(chunk: Uint8Array | string): boolean {
    if (this.destroyed || this.writableEnded) return false;
    const stream = this.#stream ?? this.#startStream();
    stream.enqueue(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    return (stream.desiredSize ?? 0) > 0;
  }

  end(chunk?: Uint8Array | string): this {
    if (this.writableEnded || this.destroyed) return this;
    this.writableEnded = true;
    this.headersSent = true;
    this.req.answered();
    if (this.#stream !== undefined) {
      if (chunk !== undefined && chunk.length > 0) this.#stream.enqueue(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
      this.#stream.close();
    } else {
      this.#resolve(new Response(chunk ?? null, { status: this.#status, headers: this.#finalHeaders() }));
      this.req.unread();
    }
    this.writableFinished = true;
    queueMicrotask(() => this.#close());
    return this;
  }

  // The runtime's server answers `Expect: 100-continue` itself, when the body is read: the Fetch
  // API has no way to send it.
  writeContinue(): void {}

  destroy(): this {
    if (this.#destroyed) return this;
    this.#destroyed = true;
    if (this.#stream !== undefined) this.#stream.error(new Error("answer cut off"));
    else if (!this.writableEnded) this.#reject(new Error("answer cut off"));
    this.#close();
    return this;
  }

  #startStream(): ReadableStreamDefaultController<Uint8Array> {
    this.headersSent = true;
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          controller = c;
        },
        // The client took what waited: a writer held back by a full buffer may go on. A runtime
        // may ask for more before its queue is below the mark, too (Bun does).
        pull: (c) => {
          if ((c.desiredSize ?? 0) > 0) this.emit("drain");
        },
        cancel: () => this.req.socket.destroy(),
      },
      { highWaterMark: STREAM_HIGH_WATER, size: (chunk) => chunk.byteLength },
    );
    this.#stream = controller;
    this.#resolve(new Response(body, { status: this.#status, headers: this.#finalHeaders() }));
    return controller;
  }

  // A runtime may close the connection of a request that said `connection: close` without saying
  // so (Bun does): the answer says it, or a client could send its next request on a connection
  // being closed.
  #finalHeaders(): Record<string, string> {
    if (!this.shouldKeepAlive || CLOSE.test(this.req.headers.connection ?? "")) this.#headers.connection = "close";
    return this.#headers;
  }

  // `close` once: the answer has gone, or its client.
  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#watch.delete(this.req);
    this.emit("close");
  }
}

const CLOSE = /(?:^|[\s,])close(?:$|[\s,])/i;

// A streamed answer's buffer, in bytes, past which `write` says to wait for `drain`.
const STREAM_HIGH_WATER = 64 * 1024;

function headerValue(value: string | number | readonly string[]): string {
  return typeof value === "string" ? value : typeof value === "number" ? String(value) : value.join(", ");
}
