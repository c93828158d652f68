/**
 * A Fetch API `Request` as the door's handlers read requests ({@link HttpRequest}), for a runtime
 * whose HTTP server speaks the Fetch API. What the Fetch API has no word for (a connection's idle
 * timeout) the runtime's listener lends it, as a {@link RequestWatch}.
 */
import { EventEmitter } from "node:events";
import type { HttpRequest, IncomingHttpHeaders } from "../http-message.js";

/**
 * What the runtime's listener does for a request it watches, once it has waited a while
 * unanswered (see {@link FetchRequest.watch}), and is told once it is answered or its client gone.
 */
export interface RequestWatch {
  /** Lets the connection of `request` be silent longer while it is under way; throws when its client is gone. */
  extend(request: Request): void;
  /** Gives the connection of `request` the server's idle timeout back; throws when its client is gone. */
  restore(request: Request): void;
  /** The request is answered, or its client gone: it is watched no more. */
  delete(req: FetchRequest): void;
}

// A body declared up to this size is read whole, in one buffer (the fastest way); a larger one
// streams, so that its bytes are held against the budget as they arrive, and a client that
// declares much but sends little holds only what it sent.
const WHOLE_BODY = 64 * 1024;

/** A Fetch Request as the handlers read requests: its body comes as `data` events once read. */
export class FetchRequest extends EventEmitter implements HttpRequest {
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
  #lent: RequestWatch | undefined;

  constructor(
    request: Request,
    /** When it arrived (performance.now()). */
    readonly arrival: number,
    /** Its headers by lower-cased name, as the runtime reads them fastest. */
    headers: IncomingHttpHeaders,
  ) {
    super();
    this.#request = request;
    this.method = request.method;
    // A Request's URL is absolute: the path and query are what follows its authority.
    const full = request.url;
    const at = full.indexOf("/", full.indexOf("//") + 2);
    this.url = at < 0 ? "/" : full.slice(at);
    this.headers = headers;
    this.socket = { destroy: () => this.#leave() };
  }

  /**
   * From now on, a client that leaves is heard of; and once its body is in (the request is then
   * the server's to answer), the connection may be silent longer, as the watch extends it, until
   * {@link answered}. A client still sending keeps the server's idle timeout: going silent
   * mid-body must not hold the connection longer.
   */
  watch(watch: RequestWatch): void {
    const { signal } = this.#request;
    if (signal.aborted) return this.#leave();
    signal.addEventListener("abort", () => this.#leave(), { once: true });
    // Runs from a timer or a body's end, after the client may have gone, or its answer (given
    // before the body ended): nothing to extend then.
    const extend = () => {
      if (this.#answered) return;
      try {
        watch.extend(this.#request);
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
   * server's idle timeout back. A runtime may keep a request's timeout on its connection after
   * the answer, and take a new one only until then (Bun does).
   */
  answered(): void {
    this.#answered = true;
    const lent = this.#lent;
    if (lent === undefined) return;
    this.#lent = undefined;
    try {
      lent.restore(this.#request);
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
      const length = request.headers.get("content-length");
      if (length !== null && Number(length) <= WHOLE_BODY) {
        // A small body of known size comes whole, in a buffer of its own.
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
