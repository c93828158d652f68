/**
 * One request on Bun.serve as the front's handlers see it: a {@link BunRequest} and the
 * {@link BunResponse} that becomes its Response, and the {@link Watch} on those still unanswered.
 */
import { EventEmitter } from "node:events";
import type { HttpRequest, HttpResponse, IncomingHttpHeaders, OutgoingHttpHeaders } from "../http-message.js";

/** What Shoal uses of a Bun.serve server (no type package needed at build time). */
export interface BunServer {
  readonly port: number;
  readonly hostname: string;
  stop(closeActiveConnections?: boolean): Promise<void>;
  /** Seconds a request's connection may stay silent before Bun closes it (0: no limit). */
  timeout(request: Request, seconds: number): void;
}

// How long a request may go unanswered before its connection is watched (see Watch).
const WATCH_MS = 20;

/**
 * The requests not yet answered, each watched once it has waited {@link WATCH_MS}: whether its
 * client leaves (the request's abort signal), and a silence of up to its deadline on its
 * connection (Bun closes one silent for its idle timeout, even with a request under way), until
 * its answer goes out. Most requests are answered sooner and never pay for either; a client that
 * left meanwhile is found gone at once, as its signal is then already aborted.
 */
export class Watch {
  // In order of arrival.
  readonly #waiting = new Set<BunRequest>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly server: BunServer,
    /** Seconds a connection may be silent while its request is under way. */
    readonly busyS: number,
    /** Seconds an idle connection stays open: the server's idle timeout. */
    readonly idleS: number,
  ) {}

  add(req: BunRequest): void {
    this.#waiting.add(req);
    this.#timer ??= setInterval(() => this.#sweep(), WATCH_MS);
  }

  /** The request is answered, or its client gone. */
  delete(req: BunRequest): void {
    this.#waiting.delete(req);
  }

  #sweep(): void {
    const now = performance.now();
    for (const req of this.#waiting) {
      if (now - req.arrival < WATCH_MS) break;
      this.#waiting.delete(req);
      req.watch(this);
    }
    if (this.#waiting.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** A Bun Request as the handlers read requests: its body comes as `data` events once read. */
export class BunRequest extends EventEmitter implements HttpRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly httpVersion = "1.1";
  complete = false;
  readonly socket: { destroy(): void };
  readonly #request: Request;
  #reading = false;
  #gone = false;
  #answered = false;
  // The watch whose longer silence the connection has now: it is taken back with the answer.
  #lent: Watch | undefined;

  constructor(
    request: Request,
    /** When it arrived (performance.now()). */
    readonly arrival: number,
  ) {
    super();
    this.#request = request;
    this.method = request.method;
    // Bun gives the absolute URL: the path and query are what follows its authority.
    const full = request.url;
    const at = full.indexOf("/", full.indexOf("//") + 2);
    this.url = at < 0 ? "/" : full.slice(at);
    this.headers = (request.headers as Headers & { toJSON(): IncomingHttpHeaders }).toJSON();
    this.socket = { destroy: () => this.#leave() };
  }

  /**
   * From now on, a client that leaves is heard of; and once its body is in (the request is then
   * the server's to answer), the connection may be silent up to the watch's `busyS` seconds, until
   * {@link answered}. A client still sending keeps Bun's idle timeout: going silent mid-body must
   * not hold the connection longer.
   */
  watch(watch: Watch): void {
    const { signal } = this.#request;
    if (signal.aborted) return this.#leave();
    signal.addEventListener("abort", () => this.#leave(), { once: true });
    // Runs from a timer or a body's end, after the client may have gone, or its answer (given
    // before the body ended): nothing to extend then.
    const extend = () => {
      if (this.#answered) return;
      try {
        watch.server.timeout(this.#request, watch.busyS);
        this.#lent = watch;
      } catch {
        this.#leave();
      }
    };
    if (this.complete || this.#request.body === null) extend();
    else this.once("end", extend);
  }

  /**
   * Its answer is complete and about to go out: a connection lent a longer silence gets the
   * server's idle timeout back. Bun keeps a request's timeout on its connection after the answer,
   * and takes a new one only until then.
   */
  answered(): void {
    this.#answered = true;
    const lent = this.#lent;
    if (lent === undefined) return;
    this.#lent = undefined;
    try {
      lent.server.timeout(this.#request, lent.idleS);
    } catch {
      // The client is gone: its connection with it.
    }
  }

  /** The client left, or its connection is to be cut: no more body, and `close` for whoever waits. */
  #leave(): void {
    if (this.#gone) return;
    this.#gone = true;
    if (this.#reading && !this.complete) void this.#request.body?.cancel().catch(() => undefined);
    this.emit("close");
  }

  /** Whether the client has left. */
  get gone(): boolean {
    return this.#gone;
  }

  /**
   * Reads and drops a body nobody read, as its answer goes out: a client still sending could
   * otherwise lose that answer to a reset.
   */
  unread(): void {
    const body = this.#request.body;
    if (this.#reading || this.#gone || body === null) return;
    this.#reading = true;
    void (async () => {
      try {
        for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) void chunk;
      } catch {
        this.#leave();
      }
    })();
  }

  // The body is read once someone listens for it.
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    super.on(event, listener);
    if (event === "data" && !this.#reading) {
      this.#reading = true;
      void this.#read();
    }
    return this;
  }

  async #read(): Promise<void> {
    const request = this.#request;
    try {
      if (request.headers.has("content-length")) {
        // A body of known size comes whole, in a buffer of its own.
        const bytes = await request.arrayBuffer();
        if (bytes.byteLength > 0) this.emit("data", Buffer.from(bytes));
      } else if (request.body !== null) {
        for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
          if (this.#gone) return;
          this.emit("data", Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        }
      }
    } catch {
      // The client left while sending its body.
      this.#leave();
      return;
    }
    if (this.#gone) return;
    this.complete = true;
    this.emit("end");
  }
}

/**
 * A Response being written: the handlers' `writeHead` and `end` make it whole; a `write` before
 * `end` starts it as a stream of the chunks written, whose backlog is `writableLength`. Its head
 * is written once: headers set or a head written after that change nothing, and neither does
 * anything written after its end (where node:http's response would throw or fail).
 */
export class BunResponse extends EventEmitter implements HttpResponse {
  readonly req: BunRequest;
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

  readonly #watch: Watch;

  constructor(req: BunRequest, watch: Watch) {
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

  // Bun answers `Expect: 100-continue` itself when the body is read.
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
        // The client took what waited: a writer held back by a full buffer may go on. Bun asks
        // for more before its queue is below the mark, too.
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

  // Bun closes the connection of a request that said `connection: close` without saying so: the
  // answer says it, or a client could send its next request on a connection being closed.
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
