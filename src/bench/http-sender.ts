/**
 * HTTP/1.1 requests for a load generator, on plain `node:net` sockets: each request is one buffer
 * written at once (its head and body made beforehand), and an answer is read only as far as its
 * status and its end (Content-Length or chunked). `node:http`'s client parses every header into
 * objects and makes a request object per call: on a small machine, where the load generator and
 * the server share the cores, that costs the server a third of its throughput against wrk.
 */
import { connect, type Socket } from "node:net";
import type { Send } from "./loadgen.js";

// The caller of the request in flight.
interface Waiter {
  resolve(result: true | string): void;
  reject(err: Error): void;
}

const HEAD_END = Buffer.from("\r\n\r\n");
const LINE_END = Buffer.from("\r\n");

/**
 * Sends `body` (GET without one) to `url` over at most `connections` kept-alive connections: a
 * call waits for a free one when all are busy. Resolves true for a 2xx, `HTTP <status>` otherwise;
 * rejects when the connection fails (its error code is the outcome).
 */
export function httpSender(url: string, body: Uint8Array | undefined, headers: Record<string, string>, connections: number): { send: Send; close(): void } {
  const target = new URL(url);
  if (target.protocol !== "http:") throw new Error(`${url}: the load generator speaks plain HTTP/1.1 only (no TLS)`);
  const head = [`${body === undefined ? "GET" : "POST"} ${target.pathname}${target.search} HTTP/1.1`, `host: ${target.host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (body !== undefined) head.push(`content-length: ${body.byteLength}`);
  const request = Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`, "latin1"), body ?? new Uint8Array(0)]);
  const port = Number(target.port || 80);
  const idle: Connection[] = [];
  const queue: ((c: Connection) => void)[] = [];
  const all = new Set<Connection>();
  let closed = false;
  const release = (c: Connection) => {
    if (!c.usable) {
      all.delete(c);
      // A waiter takes a fresh connection in place of the broken one.
      const next = queue.shift();
      if (next !== undefined) next(open());
      return;
    }
    const next = queue.shift();
    if (next !== undefined) next(c);
    else idle.push(c);
  };
  const open = () => {
    const c = new Connection(target.hostname, port);
    all.add(c);
    return c;
  };
  const take = (): Connection | Promise<Connection> => idle.pop() ?? (all.size < connections ? open() : new Promise((resolve) => queue.push(resolve)));
  const send: Send = async () => {
    if (closed) throw new Error("the sender is closed");
    const taken = take();
    const c = taken instanceof Connection ? taken : await taken;
    try {
      return await c.request(request);
    } finally {
      release(c);
    }
  };
  return {
    send,
    close: () => {
      closed = true;
      for (const c of all) c.destroy();
    },
  };
}

// One kept-alive connection, one request at a time.
class Connection {
  readonly #socket: Socket;
  #waiter: Waiter | undefined;
  #buffer: Buffer | undefined;
  // What the answer being read has told so far.
  #status = 0;
  #bodyStart = -1;
  #length = -1;
  #chunked = false;
  #closes = false;
  #cursor = 0;
  usable = true;

  constructor(host: string, port: number) {
    this.#socket = connect({ host, port, noDelay: true });
    this.#socket.on("data", (chunk: Buffer) => this.#data(chunk));
    this.#socket.on("error", (err) => this.#fail(err));
    this.#socket.on("close", () => {
      // An answer whose end is the connection's.
      if (this.#waiter !== undefined && this.#bodyStart >= 0 && this.#length < 0 && !this.#chunked) this.#done();
      this.#fail(Object.assign(new Error("the server closed the connection"), { code: "ECONNRESET" }));
    });
  }

  request(bytes: Buffer): Promise<true | string> {
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
      this.#socket.write(bytes);
    });
  }

  destroy(): void {
    this.usable = false;
    this.#socket.destroy();
  }

  #fail(err: Error): void {
    this.usable = false;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(err);
  }

  #data(chunk: Buffer): void {
    this.#buffer = this.#buffer === undefined ? chunk : Buffer.concat([this.#buffer, chunk]);
    const buffer = this.#buffer;
    if (this.#bodyStart < 0) {
      const end = buffer.indexOf(HEAD_END);
      if (end < 0) return;
      const text = buffer.toString("latin1", 0, end);
      this.#status = Number(text.slice(9, 12));
      const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(text);
      this.#length = length === null ? -1 : Number(length[1]);
      this.#chunked = /\r\ntransfer-encoding:[^\r]*chunked/i.test(text);
      this.#closes = /\r\nconnection:[ \t]*close/i.test(text);
      this.#bodyStart = end + 4;
      this.#cursor = this.#bodyStart;
      // 1xx answers (100 Continue) come before the real one.
      if (this.#status < 200) return this.#restart(buffer.subarray(this.#bodyStart));
    }
    if (this.#length >= 0) {
      if (buffer.length >= this.#bodyStart + this.#length) this.#done();
      return;
    }
    if (this.#chunked) {
      // Each chunk: its size in hex, CRLF, its bytes, CRLF; the last is of size 0, then CRLF.
      for (;;) {
        const eol = buffer.indexOf(LINE_END, this.#cursor);
        if (eol < 0) return;
        const size = parseInt(buffer.toString("latin1", this.#cursor, eol), 16);
        const next = eol + 2 + size + 2;
        if (buffer.length < next) return;
        if (size === 0) return this.#done();
        this.#cursor = next;
      }
    }
  }

  #restart(rest: Buffer): void {
    this.#buffer = undefined;
    this.#bodyStart = -1;
    if (rest.length > 0) this.#data(rest);
  }

  #done(): void {
    const status = this.#status;
    this.#buffer = undefined;
    this.#bodyStart = -1;
    if (this.#closes) this.destroy();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve(status >= 200 && status < 300 ? true : `HTTP ${status}`);
  }
}
