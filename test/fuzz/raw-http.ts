/**
 * HTTP/1.1 at the level of bytes, for the harnesses that must see exactly what the server sent:
 * a response parser that counts every answer on a connection (so a second answer to one request
 * cannot hide), a one-shot exchange for requests no HTTP client would send, and a keep-alive
 * connection that sends one request at a time and notices bytes nobody asked for.
 */
import { connect, type Socket } from "node:net";

/** A response as it came over the wire. */
export interface RawResponse {
  status: number;
  /** Header names lower-cased; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

const CRLF2 = Buffer.from("\r\n\r\n");

/**
 * Splits the bytes of a connection into responses. `expect(head)` announces each request sent,
 * so that the response to a HEAD is known to have no body; informational (1xx) responses are
 * skipped, as clients do.
 */
export class ResponseParser {
  #buffer: Buffer = Buffer.alloc(0);
  readonly #heads: boolean[] = [];
  #current: { status: number; headers: Record<string, string>; length: number | "chunked" | "close" } | undefined;
  #chunks: Buffer[] = [];
  /** Set when the bytes are not HTTP responses; nothing more is parsed then. */
  error: string | undefined;

  /** A request was sent; `head` when it was a HEAD request. */
  expect(head: boolean): void {
    this.#heads.push(head);
  }

  /** Bytes received that are not part of a complete response yet. */
  get buffered(): number {
    return this.#buffer.length;
  }

  /** Feeds received bytes; returns the responses they complete. */
  push(chunk: Buffer): RawResponse[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const out: RawResponse[] = [];
    for (;;) {
      if (this.error !== undefined) return out;
      const response = this.#next();
      if (response === undefined) return out;
      out.push(response);
    }
  }

  /** The connection ended: a body delimited by the close is complete now. */
  end(): RawResponse | undefined {
    if (this.#current?.length !== "close") return undefined;
    const { status, headers } = this.#current;
    this.#current = undefined;
    const body = this.#buffer;
    this.#buffer = Buffer.alloc(0);
    return { status, headers, body };
  }

  #next(): RawResponse | undefined {
    if (this.#current === undefined && !this.#readHead()) return undefined;
    const current = this.#current!;
    if (current.length === "close") return undefined;
    let body: Buffer | undefined;
    if (current.length === "chunked") body = this.#readChunked();
    else if (this.#buffer.length >= current.length) {
      body = this.#buffer.subarray(0, current.length);
      this.#buffer = this.#buffer.subarray(current.length);
    }
    if (body === undefined) return undefined;
    this.#current = undefined;
    return { status: current.status, headers: current.headers, body };
  }

  // Reads a status line and headers, if all are here; skips 1xx responses.
  #readHead(): boolean {
    for (;;) {
      const end = this.#buffer.indexOf(CRLF2);
      if (end < 0) {
        if (this.#buffer.length > 64 * 1024) this.error = "a response head longer than 64 KB";
        return false;
      }
      const lines = this.#buffer.subarray(0, end).toString("latin1").split("\r\n");
      this.#buffer = this.#buffer.subarray(end + 4);
      const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0]!);
      if (m === null) {
        this.error = `not an HTTP status line: ${JSON.stringify(lines[0]!.slice(0, 80))}`;
        return false;
      }
      const status = Number(m[1]);
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        if (colon <= 0) {
          this.error = `a malformed response header: ${JSON.stringify(line.slice(0, 80))}`;
          return false;
        }
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      if (status >= 100 && status < 200) continue;
      const head = this.#heads.shift() ?? false;
      let length: number | "chunked" | "close";
      if (head || status === 204 || status === 304) length = 0;
      else if (/\bchunked\b/i.test(headers["transfer-encoding"] ?? "")) length = "chunked";
      else if (headers["content-length"] !== undefined) length = Number(headers["content-length"]);
      else length = "close";
      if (typeof length === "number" && !(Number.isSafeInteger(length) && length >= 0)) {
        this.error = `a bad content-length: ${headers["content-length"]}`;
        return false;
      }
      this.#current = { status, headers, length };
      this.#chunks = [];
      return true;
    }
  }

  // Reads chunks until the last one; undefined while they are still arriving.
  #readChunked(): Buffer | undefined {
    for (;;) {
      const eol = this.#buffer.indexOf("\r\n");
      if (eol < 0) return undefined;
      const size = parseInt(this.#buffer.subarray(0, eol).toString("latin1"), 16);
      if (!Number.isSafeInteger(size) || size < 0) {
        this.error = "a malformed chunk size";
        return undefined;
      }
      if (size === 0) {
        const trailerEnd = this.#buffer.indexOf(CRLF2, eol);
        const end = this.#buffer.subarray(eol, eol + 4).equals(CRLF2) ? eol + 4 : trailerEnd < 0 ? -1 : trailerEnd + 4;
        if (end < 0) return undefined;
        this.#buffer = this.#buffer.subarray(end);
        return Buffer.concat(this.#chunks);
      }
      if (this.#buffer.length < eol + 2 + size + 2) return undefined;
      this.#chunks.push(this.#buffer.subarray(eol + 2, eol + 2 + size));
      this.#buffer = this.#buffer.subarray(eol + 2 + size + 2);
    }
  }
}

/** What a one-shot exchange saw. */
export interface RawExchange {
  /** Every response on the connection (one is expected). */
  responses: RawResponse[];
  /** Why no (or no complete) response came: a socket error, a timeout, bytes that are not HTTP. */
  error: string | undefined;
}

/**
 * Opens a connection, sends `bytes`, and reads the answer; then waits `graceMs` more for a second
 * answer that should not come, and hangs up (or sees the server close first). An error while
 * writing is no failure if an answer came anyway: a server may answer and close before it has
 * read a request it refuses. The client never half-closes: Node's server takes a half-closed
 * connection for a client gone, and drops its request unanswered.
 */
export function exchangeRaw(port: number, bytes: Uint8Array, timeoutMs: number, graceMs = 100): Promise<RawExchange> {
  return new Promise((resolve) => {
    const parser = new ResponseParser();
    parser.expect(false);
    const responses: RawResponse[] = [];
    let error: string | undefined;
    let grace: NodeJS.Timeout | undefined;
    const socket = connect(port, "127.0.0.1");
    const timer = setTimeout(() => {
      error = `no answer within ${timeoutMs} ms`;
      socket.destroy();
    }, timeoutMs);
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (chunk: Buffer) => {
      responses.push(...parser.push(chunk));
      if (responses.length > 0 && grace === undefined) grace = setTimeout(() => socket.destroy(), graceMs);
    });
    socket.on("error", (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on("close", () => {
      clearTimeout(timer);
      clearTimeout(grace);
      const last = parser.end();
      if (last !== undefined) responses.push(last);
      if (parser.error !== undefined) error = parser.error;
      else if (responses.length === 0) error ??= parser.buffered > 0 ? "the connection closed within a response" : "the connection closed without an answer";
      resolve({ responses, error: responses.length > 0 && parser.error === undefined ? undefined : error });
    });
  });
}

/** One request on a kept-alive connection: its bytes, and whether it is a HEAD. */
export interface WireRequest {
  bytes: Uint8Array;
  head?: boolean;
}

/**
 * A kept-alive connection that carries one request at a time. Bytes the server sends while no
 * request is waiting are kept in `unsolicited`: a second answer to a request shows there.
 */
export class KeepAliveConnection {
  readonly #socket: Socket;
  readonly #parser = new ResponseParser();
  #waiting: { resolve(r: RawResponse): void; reject(e: Error): void } | undefined;
  #ready: Promise<void>;
  #closed = false;
  /** Responses (or bytes) that arrived with no request waiting. */
  unsolicited = 0;

  constructor(port: number) {
    this.#socket = connect(port, "127.0.0.1");
    this.#socket.setNoDelay(true);
    this.#ready = new Promise((resolve, reject) => {
      this.#socket.once("connect", () => resolve());
      this.#socket.once("error", reject);
    });
    this.#ready.catch(() => {});
    this.#socket.on("data", (chunk: Buffer) => {
      const responses = this.#parser.push(chunk);
      for (const response of responses) {
        const waiting = this.#waiting;
        this.#waiting = undefined;
        if (waiting === undefined) this.unsolicited++;
        else waiting.resolve(response);
      }
      if (this.#parser.error !== undefined) this.#fail(new Error(this.#parser.error));
      else if (this.#waiting === undefined && this.#parser.buffered > 0) this.unsolicited++;
    });
    this.#socket.on("error", (err: NodeJS.ErrnoException) => this.#fail(new Error(err.code ?? err.message)));
    this.#socket.on("close", () => {
      this.#closed = true;
      const last = this.#parser.end();
      if (last !== undefined && this.#waiting !== undefined) {
        const waiting = this.#waiting;
        this.#waiting = undefined;
        waiting.resolve(last);
      }
      this.#fail(new Error("the connection closed without an answer"));
    });
  }

  /** The connection is closed (by either side); open another. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Sends a request and resolves with its answer; rejects if the connection ends first. */
  async send(request: WireRequest): Promise<RawResponse> {
    await this.#ready;
    if (this.#closed) throw new Error("the connection is closed");
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
      this.#parser.expect(request.head ?? false);
      this.#socket.write(request.bytes);
    });
  }

  /** Writes the first `bytes` of a request and nothing more (a client that stalls or is about to vanish). */
  async sendPart(bytes: Uint8Array): Promise<void> {
    await this.#ready;
    if (!this.#closed) this.#socket.write(bytes);
  }

  /** Hangs up at once, as a client that gives up does. */
  destroy(): void {
    this.#closed = true;
    this.#waiting = undefined;
    this.#socket.destroy();
  }

  /** Closes the connection politely. */
  close(): void {
    this.#socket.end();
  }

  #fail(err: Error): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(err);
  }
}

/** The bytes of a request: request line, headers (content-length added when there is a body), body. */
export function requestBytes(method: string, path: string, headers: Record<string, string>, body?: Uint8Array): Buffer {
  let head = `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  if (body !== undefined) head += `content-length: ${body.length}\r\n`;
  head += "\r\n";
  return body === undefined ? Buffer.from(head, "latin1") : Buffer.concat([Buffer.from(head, "latin1"), body]);
}
