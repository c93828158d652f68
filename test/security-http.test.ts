/**
 * HTTP limits a client cannot get around: header and upload timeouts answered 408, deadlines
 * counted from a request's first byte, a cap on connections, a budget of body bytes in flight,
 * and paths whose spellings cannot add metric series or take the server down.
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { ByteBudget } from "../src/serving/byte-budget.js";
import { NODE_HTTP_ONLY, assertError, fixture, post, rawRequest, send, sleep, startServer, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

/** A response read off a raw connection. */
interface WireResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: any;
  /** performance.now() when the whole response had arrived. */
  at: number;
}

/** One TCP connection that a test writes to as slowly as it likes, reading whole HTTP responses back. */
class Wire {
  readonly socket: Socket;
  /** Settles when the connection has closed, with the time it closed. */
  readonly closed: Promise<number>;
  #buffer = Buffer.alloc(0);
  #waiter: (() => void) | undefined;
  #ended = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#waiter?.();
    });
    this.closed = new Promise((resolve) =>
      socket.on("close", () => {
        this.#ended = true;
        this.#waiter?.();
        resolve(performance.now());
      }),
    );
  }

  /** `halfOpen`: the connection stays open for writing after the server closes its side. */
  static open(port: number, halfOpen = false): Promise<Wire> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: halfOpen });
      socket.once("connect", () => resolve(new Wire(socket)));
      socket.once("error", reject);
    });
  }

  get open(): boolean {
    return !this.#ended;
  }

  /** What has arrived and is not part of a response read so far. */
  get rest(): string {
    return this.#buffer.toString("latin1");
  }

  write(data: string | Buffer): void {
    if (this.open && !this.socket.destroyed) this.socket.write(data);
  }

  /** Writes `pieces` one by one, `everyMs` apart, stopping early if the connection closes. */
  async trickle(pieces: (string | Buffer)[], everyMs: number): Promise<void> {
    for (const piece of pieces) {
      if (!this.open) return;
      this.write(piece);
      await sleep(everyMs);
    }
  }

  /**
   * The next whole response (to a HEAD when `toHead` is set: no body); rejects if the connection
   * closes first or after `timeoutMs`.
   */
  async response(timeoutMs = 10_000, toHead = false): Promise<WireResponse> {
    const end = performance.now() + timeoutMs;
    for (;;) {
      const parsed = this.#take(toHead);
      if (parsed !== undefined) return parsed;
      if (!this.open) throw new Error(`the connection closed without a whole response (${this.#buffer.length} bytes: ${this.#buffer.toString("latin1").slice(0, 200)})`);
      if (performance.now() > end) throw new Error(`no whole response within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#waiter = undefined;
    }
  }

  // A whole response from the front of the buffer (our answers always carry a content-length).
  #take(toHead: boolean): WireResponse | undefined {
    const head = this.#buffer.indexOf("\r\n\r\n");
    if (head < 0) return undefined;
    const [statusLine, ...lines] = this.#buffer.subarray(0, head).toString("latin1").split("\r\n");
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = toHead ? 0 : Number(headers["content-length"] ?? 0);
    if (this.#buffer.length < head + 4 + length) return undefined;
    const text = this.#buffer.subarray(head + 4, head + 4 + length).toString("utf8");
    this.#buffer = this.#buffer.subarray(head + 4 + length);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: Number(statusLine!.split(" ")[1]), headers, text, json, at: performance.now() };
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A request's head, as a client would write it. */
function head(method: string, path: string, headers: Record<string, string | number> = {}): string {
  const lines = Object.entries({ host: "localhost", ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
  return `${method} ${path} HTTP/1.1\r\n${lines.join("")}\r\n`;
}

/** A whole JSON POST to /inference. */
function inference(body: unknown): string {
  const text = JSON.stringify(body);
  return head("POST", "/inference", { "content-type": "application/json", "content-length": Buffer.byteLength(text) }) + text;
}

/** Asserts one of our JSON error answers read off the wire. */
function assertWireError(res: WireResponse, status: number, error: string | RegExp): void {
  const context = `${res.status} ${res.text}`;
  assert.equal(res.status, status, context);
  assert.equal(res.headers["content-type"], "application/json", context);
  assert.ok(res.headers["x-request-id"], `no x-request-id on ${context}`);
  assert.deepEqual(Object.keys(res.json ?? {}), ["error"], context);
  if (typeof error === "string") assert.equal(res.json.error, error, context);
  else assert.match(res.json.error, error, context);
}

/** The value of one sample of the server's /metrics, or undefined when the series is absent. */
async function metric(url: string, name: string, labels = ""): Promise<number | undefined> {
  const text = (await send(`${url}/metrics`)).text;
  const line = text.split("\n").find((l) => l.startsWith(labels === "" ? `${name} ` : `${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("ByteBudget", () => {
  test("a hold takes what fits, nothing of what does not, and returns its bytes exactly once", () => {
    const budget = new ByteBudget(100);
    const a = budget.hold();
    const b = budget.hold();
    assert.equal(a.take(60), true);
    assert.equal(b.take(50), false, "more than is left");
    assert.equal(b.bytes, 0);
    assert.equal(b.take(40), true);
    assert.equal(budget.held, 100);
    a.release();
    a.release();
    assert.equal(budget.held, 40, "a second release returns nothing");
    assert.equal(a.take(10), false, "a released hold takes nothing more");
    assert.equal(b.take(60), true);
    b.release();
    assert.equal(budget.held, 0);
  });
});

describe("requests node:http gives up on, late or malformed (--headers-timeout 1000 --request-timeout 2000)", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("basic.ts"), { args: ["--headers-timeout", "1000", "--request-timeout", "2000", "--timeout", "10000"] });
  });
  after(async () => {
    await server?.stop();
  });

  test("headers sent a line at a time (slow loris) are answered 408 with our JSON body, and the connection closed", { skip: NODE_HTTP_ONLY }, async () => {
    const wire = await Wire.open(server.port);
    const start = performance.now();
    const lines = [`POST /inference HTTP/1.1\r\n`, ...Array.from({ length: 40 }, (_, i) => `x-pad-${i}: ${"y".repeat(10)}\r\n`)];
    void wire.trickle(lines, 200);
    const res = await wire.response();
    assertWireError(res, 408, "request timeout: the request headers did not arrive within 1000 ms");
    assert.equal(res.headers.connection, "close");
    const elapsed = res.at - start;
    assert.ok(elapsed >= 900, `answered after ${elapsed} ms, before the headers timeout`);
    assert.ok(elapsed < 3000, `answered after ${elapsed} ms`);
    const closed = await Promise.race([wire.closed, sleep(3000).then(() => undefined)]);
    assert.notEqual(closed, undefined, "the connection was closed after the 408");
  });

  test("a connection that sends nothing gets the same 408 and is closed", { skip: NODE_HTTP_ONLY }, async () => {
    const wire = await Wire.open(server.port);
    const res = await wire.response(5000);
    assertWireError(res, 408, "request timeout: the request headers did not arrive within 1000 ms");
    await wire.closed;
  });

  test("a body trickled slower than --request-timeout is answered 408 by its route, and the connection closed", { skip: NODE_HTTP_ONLY }, async () => {
    const before = (await metric(server.url, "shoal_requests_total", 'route="/inference",code="408",protocol="http"')) ?? 0;
    const wire = await Wire.open(server.port);
    const start = performance.now();
    wire.write(head("POST", "/inference", { "content-type": "application/json", "content-length": 1000 }));
    void wire.trickle(Array.from({ length: 100 }, () => "          "), 200);
    const res = await wire.response();
    assertWireError(res, 408, "request timeout: the request body did not arrive within 2000 ms");
    assert.equal(res.headers.connection, "close");
    const elapsed = res.at - start;
    assert.ok(elapsed >= 1900, `answered after ${elapsed} ms, before the request timeout`);
    assert.ok(elapsed < 4000, `answered after ${elapsed} ms`);
    await wire.closed;
    assert.equal(await metric(server.url, "shoal_requests_total", 'route="/inference",code="408",protocol="http"'), before + 1, "the route counts its 408");
  });

  test("a request node:http cannot parse gets our JSON 400 or 431, and the connection is closed", { skip: NODE_HTTP_ONLY }, async () => {
    const bad = await Wire.open(server.port);
    bad.write("NOT A REQUEST\r\n\r\n");
    assertWireError(await bad.response(), 400, /^bad request: malformed HTTP request \(HPE_\w+\)$/);
    await bad.closed;
    const big = await Wire.open(server.port);
    big.write(head("GET", "/healthz", { "x-big": "b".repeat(20_000) }));
    assertWireError(await big.response(), 431, "request headers are too large");
    await big.closed;
  });

  test("a malformed chunk in a route's body is a 400 counted by the route; the connection is closed and the bytes returned", { skip: NODE_HTTP_ONLY }, async () => {
    const before = (await metric(server.url, "shoal_requests_total", 'route="/inference",code="400",protocol="http"')) ?? 0;
    const wire = await Wire.open(server.port);
    wire.write(head("POST", "/inference", { "content-type": "application/json", "transfer-encoding": "chunked" }));
    wire.write('10\r\n{"a":1234567890}\r\n');
    await sleep(200);
    wire.write("zz\r\n");
    const res = await wire.response();
    assertWireError(res, 400, /^bad request: malformed HTTP request \(HPE_\w+\)$/);
    assert.equal(res.headers.connection, "close");
    await wire.closed;
    assert.equal(await metric(server.url, "shoal_requests_total", 'route="/inference",code="400",protocol="http"'), before + 1);
    assert.equal(await metric(server.url, "shoal_request_bytes_in_flight"), 0);
  });

  test("a request sent at once on a connection kept alive is unaffected, and the server still serves", async () => {
    const wire = await Wire.open(server.port);
    for (let i = 0; i < 3; i++) {
      wire.write(inference({ n: i }));
      const res = await wire.response();
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json.echo, { n: i });
      // Idle between requests longer than the headers timeout: only a request's own bytes count.
      await sleep(1200);
    }
    wire.close();
  });
});

describe("deadlines count from a request's first byte (--timeout 1000)", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("basic.ts"), { args: ["--timeout", "1000"] });
  });
  after(async () => {
    await server?.stop();
  });

  // The request, its head written over `headMs` in small pieces and the rest at once; the
  // answer, and when the last byte was written.
  async function slowHead(wire: Wire, body: unknown, headMs: number): Promise<WireResponse & { sentAt: number }> {
    const text = inference(body);
    const cut = text.indexOf("\r\n\r\n");
    const pieces = Array.from({ length: 6 }, (_, i) => text.slice(Math.floor((cut * i) / 6), Math.floor((cut * (i + 1)) / 6)));
    await wire.trickle(pieces, headMs / 6);
    wire.write(text.slice(cut));
    const sentAt = performance.now();
    return { ...(await wire.response()), sentAt };
  }

  test("a request whose head took 1.5 s is past its deadline when it has arrived: 408, not 200", { skip: NODE_HTTP_ONLY }, async () => {
    const wire = await Wire.open(server.port);
    const res = await slowHead(wire, { sleep: 300 }, 1500);
    assertWireError(res, 408, "request timeout: no answer within 1000 ms");
    // Counted from the end of the head, the deadline would be a second away.
    assert.ok(res.at - res.sentAt < 1000, `answered ${res.at - res.sentAt} ms after the last byte`);
    wire.close();
  });

  test("the same request with a quick head is answered 200", async () => {
    const wire = await Wire.open(server.port);
    const res = await slowHead(wire, { sleep: 300 }, 150);
    assert.equal(res.status, 200, res.text);
    wire.close();
  });

  test("on a connection kept alive, the idle time before a request does not count; its own slow head does", { skip: NODE_HTTP_ONLY }, async () => {
    const wire = await Wire.open(server.port);
    wire.write(inference({ sleep: 10 }));
    assert.equal((await wire.response()).status, 200);
    await sleep(1500);
    wire.write(inference({ sleep: 300 }));
    const second = await wire.response();
    assert.equal(second.status, 200, `the idle time was counted: ${second.text}`);
    const third = await slowHead(wire, { sleep: 300 }, 1500);
    assertWireError(third, 408, "request timeout: no answer within 1000 ms");
    wire.close();
  });
});

describe("--max-connections 4", { skip: NODE_HTTP_ONLY }, () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("basic.ts"), { args: ["--max-connections", "4"] });
  });
  after(async () => {
    await server?.stop();
  });

  async function healthy(wire: Wire): Promise<void> {
    wire.write(head("GET", "/healthz"));
    const res = await wire.response();
    assert.equal(res.status, 200, res.text);
  }

  test("a fifth connection is closed at once; the four others are still answered", async () => {
    const wires = await Promise.all([1, 2, 3, 4].map(() => Wire.open(server.port)));
    for (const wire of wires) await healthy(wire);
    const fifth = await Wire.open(server.port);
    fifth.write(head("GET", "/healthz"));
    const closed = await Promise.race([fifth.closed, sleep(3000).then(() => undefined)]);
    assert.notEqual(closed, undefined, "the fifth connection was not closed");
    await assert.rejects(fifth.response(100), /closed without a whole response/);
    for (const wire of wires) await healthy(wire);
    // Once one closes, a new connection is taken.
    wires.pop()!.close();
    let next: { wire: Wire; res: WireResponse } | undefined;
    for (let attempt = 0; attempt < 40 && next === undefined; attempt++) {
      const wire = await Wire.open(server.port);
      wire.write(head("GET", "/healthz"));
      const res = await wire.response(2000).catch(() => undefined);
      if (res !== undefined) next = { wire, res };
      else await sleep(100);
    }
    assert.ok(next !== undefined && next.res.status === 200, "a new connection is served once one has closed");
    next.wire.close();
    for (const wire of wires) wire.close();
    assert.equal(server.exited, false);
  });
});

describe("a budget of body bytes in flight (--max-inflight-bytes 300000)", () => {
  const BODY = 100_000;
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("basic.ts"), { args: ["--max-request-size", "200000", "--max-inflight-bytes", "300000", "--timeout", "20000"] });
  });
  after(async () => {
    await server?.stop();
  });

  // A JSON body of exactly `size` bytes that makes forward() sleep `ms`.
  function padded(size: number, ms: number): string {
    const prefix = `{"sleep":${ms},"pad":"`;
    return `${prefix}${"p".repeat(size - prefix.length - 2)}"}`;
  }

  const held = () => metric(server.url, "shoal_request_bytes_in_flight");

  test("bodies held by a slow worker count; what does not fit is 429 at once and unread; every way out returns the bytes", async () => {
    assert.equal(await held(), 0, "nothing held at rest");
    // One worker: the first body is in forward() for 5 s, the second queued behind it.
    const slow = [post(`${server.url}/inference`, padded(BODY, 5000)), post(`${server.url}/inference`, padded(BODY, 5000))];
    for (let i = 0; i < 100 && (await held()) !== 2 * BODY; i++) await sleep(50);
    assert.equal(await held(), 2 * BODY);

    // Declared too large for what is left (but under --max-request-size): 429 before the body is sent.
    const wire = await Wire.open(server.port);
    const start = performance.now();
    wire.write(head("POST", "/inference", { "content-type": "application/json", "content-length": 150_000 }));
    const refused = await wire.response();
    assertWireError(refused, 429, "too many requests: the request bodies in flight leave no room for this one; retry later");
    assert.ok(refused.at - start < 1000, `answered after ${refused.at - start} ms`);
    assert.equal(await held(), 2 * BODY, "the refused body was never held");
    // A client that sends the body anyway is not cut off: it is dropped, and the connection serves the next request.
    wire.write(Buffer.alloc(150_000, "a"));
    wire.write(head("GET", "/healthz"));
    const next = await wire.response();
    assert.equal(next.status, 200, next.text);
    wire.close();

    // Chunked, crossing the budget while it streams: dropped and answered 429.
    assert.equal(await held(), 2 * BODY, "both slow requests still hold their bodies");
    const chunked = rawRequest(server.port, "/inference", { headers: { "content-type": "application/json", "transfer-encoding": "chunked" }, end: false });
    chunked.req.on("error", () => {});
    for (let i = 0; i < 4; i++) chunked.req.write(Buffer.alloc(30_000, "a"));
    const crossed = await chunked.response;
    assert.equal(crossed.status, 429, crossed.text);
    chunked.req.destroy();
    assert.equal(await held(), 2 * BODY, "the streamed body's bytes were returned");

    // A client gone in the middle of its body.
    const gone = rawRequest(server.port, "/inference", { headers: { "content-type": "application/json", "content-length": 50_000 }, end: false });
    gone.req.on("error", () => {});
    gone.req.write(Buffer.alloc(20_000, "a"));
    await sleep(200);
    gone.req.destroy();
    await sleep(300);
    assert.equal(await held(), 2 * BODY, "a client gone mid-body returns its bytes");

    // Over --max-request-size: 413, nothing held.
    const tooLarge = await post(`${server.url}/inference`, padded(250_000, 0));
    assertError(tooLarge, 413, "request body is too large: the limit is 200000 bytes");
    assert.equal(await held(), 2 * BODY);

    for (const reply of await Promise.all(slow)) assert.equal(reply.status, 200, reply.text);
    assert.equal(await held(), 0, "every byte returned once the slow requests are answered");

    // The budget is whole again: a large body fits.
    const after = await post(`${server.url}/inference`, padded(180_000, 0));
    assert.equal(after.status, 200, after.text);
    assert.equal(await held(), 0);
  });

  test("a body holds the bytes it has sent, not the length it declares: slow bodies cannot fill the budget", async () => {
    // Five clients declare 150,000 bytes each (750,000 in all, over the 300,000 budget) and send 10.
    const slow = Array.from({ length: 5 }, () => {
      const call = rawRequest(server.port, "/inference", { headers: { "content-type": "application/json", "content-length": 150_000 }, end: false });
      call.req.on("error", () => {});
      call.req.write(Buffer.alloc(10, "a"));
      return call;
    });
    for (let i = 0; i < 100 && (await held()) !== 50; i++) await sleep(50);
    assert.equal(await held(), 50, "each slow body holds its 10 bytes");
    // A client sending its whole body still fits.
    const normal = await post(`${server.url}/inference`, padded(BODY, 0));
    assert.equal(normal.status, 200, normal.text);
    for (const call of slow) call.req.destroy();
    for (let i = 0; i < 100 && (await held()) !== 0; i++) await sleep(50);
    assert.equal(await held(), 0, "the slow bodies' bytes are returned when their clients leave");
  });

  test("an empty body and a body that fails to decode return their bytes", async () => {
    assertError(await post(`${server.url}/inference`, ""), 400, "bad request: empty request body");
    assertError(await post(`${server.url}/inference`, "{not json"), 400, /^decoding error: /);
    assert.equal(await held(), 0);
  });
});

describe("paths cannot add metric series or take the server down", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  const request = { inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [1, 2] }] };

  before(async () => {
    repo.module("mlp", "scale.ts", { parameters: { factor: 2 } });
    server = await serveRepository(repo.dir, ["--model-control", "explicit"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  // The `route` label values of every series in /metrics.
  async function routes(): Promise<string[]> {
    const text = (await send(`${server.url}/metrics`)).text;
    return [...new Set([...text.matchAll(/route="([^"]*)"/g)].map((m) => m[1]!))].sort();
  }

  // Every spelling of "mlp" with some of its letters percent-encoded, in either case of hex digit.
  function spellings(): string[] {
    const forms = [["m", "%6d", "%6D"], ["l", "%6c", "%6C"], ["p", "%70"]];
    const out: string[] = [];
    for (const m of forms[0]!) for (const l of forms[1]!) for (const p of forms[2]!) out.push(`${m}${l}${p}`);
    return out.filter((s) => s !== "mlp");
  }

  test("32 spellings of one model's path add no route series to /metrics", async () => {
    const first = await post(`${server.url}/v2/models/mlp/infer`, request);
    assert.equal(first.status, 200, first.text);
    const known = await routes();
    assert.ok(known.includes("/v2/models/mlp/infer"), known.join(", "));
    const paths = spellings().flatMap((name) => [`/v2/models/${name}/infer`, `/v2/models/${name}/ready`]).slice(0, 32);
    assert.equal(new Set(paths).size, 32);
    for (const path of paths) {
      const reply = path.endsWith("/infer") ? await post(`${server.url}${path}`, request) : await send(`${server.url}${path}`);
      assert.equal(reply.status, 200, `${path}: ${reply.text}`);
    }
    assert.deepEqual(await routes(), known);
    assert.equal(await metric(server.url, "shoal_requests_total", 'route="/v2/models/mlp/infer",code="200",protocol="http"'), 17);
  });

  test("malformed percent-encoding is a 400, and the server goes on serving", async () => {
    assertError(await send(`${server.url}/v2/models/%E0%A4%A/ready`), 400, /^bad request: malformed percent-encoding/);
    assertError(await send(`${server.url}/v2/repository/models/%/load`, { method: "POST" }), 400, /^bad request: malformed percent-encoding/);
    assertError(await post(`${server.url}/v2/models/%E0%A4%A/infer`, request), 400, /^bad request: malformed percent-encoding/);
    assert.equal(server.exited, false);
    assert.equal((await send(`${server.url}/v2/health/ready`)).status, 200);
    const reply = await post(`${server.url}/v2/models/mlp/infer`, request);
    assert.equal(reply.status, 200, reply.text);
  });
});

describe("every request gets exactly one answer of our shape, and gets to read it", { skip: NODE_HTTP_ONLY }, () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("basic.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("a route that has answered before reading its chunked body gets no second answer when that body turns out malformed", async () => {
    for (const [method, path, status] of [["POST", "/nothing", 404], ["PUT", "/inference", 405]] as const) {
      const wire = await Wire.open(server.port);
      wire.write(head(method, path, { "transfer-encoding": "chunked" }));
      assert.equal((await wire.response()).status, status);
      wire.write("zz\r\nx\r\n0\r\n\r\n");
      await wire.closed;
      assert.equal(wire.rest, "", `nothing more after the ${status}`);
    }
  });

  test("an HTTP/1.1 request without Host gets our JSON 400 with its request id, and the connection is closed; HTTP/1.0 needs none", async () => {
    const wire = await Wire.open(server.port);
    wire.write('POST /inference HTTP/1.1\r\nx-request-id: no-host\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"n": 1}');
    const res = await wire.response();
    assertWireError(res, 400, "bad request: an HTTP/1.1 request must have a Host header");
    assert.equal(res.headers["x-request-id"], "no-host");
    assert.equal(res.headers.connection, "close");
    await wire.closed;
    const old = await Wire.open(server.port);
    old.write('POST /inference HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"n": 1}');
    const served = await old.response();
    assert.equal(served.status, 200, served.text);
    assert.deepEqual(served.json.echo, { n: 1 });
  });

  test("an error answered to a HEAD has no body, node:http's parser's own included", async () => {
    const cases = [
      [431, head("HEAD", "/healthz", { "x-big": "b".repeat(20_000) })],
      [400, "HEAD /healthz HTTP/1.1\r\nhost: localhost\r\nbad header\r\n\r\n"],
      [400, "\r\nHEAD /healthz HTTP/1.1\r\n\r\n"],
    ] as const;
    for (const [status, request] of cases) {
      const wire = await Wire.open(server.port);
      wire.write(request);
      const res = await wire.response(10_000, true);
      assert.equal(res.status, status);
      assert.equal(res.headers["content-type"], "application/json");
      assert.ok(res.headers["x-request-id"]);
      await wire.closed;
      assert.equal(wire.rest, "", `no body after the ${status} to a HEAD`);
    }
  });

  test("an answer that closes the connection while a large body is still arriving is read by the client, not lost to a reset", async () => {
    const MB = 1024 * 1024;
    const body = Buffer.alloc(21 * MB, 0x20);
    const cases = [
      [405, "PUT", { connection: "close" }, 12 * MB],
      [431, "POST", { "x-padding": "p".repeat(20_000) }, 12 * MB],
      // Past what is read and dropped of a refused body: refused at once.
      [413, "POST", {}, 21 * MB],
    ] as const;
    for (const [status, method, headers, size] of cases) {
      for (let round = 0; round < 3; round++) {
        const sent = Array.from({ length: 4 }, () => rawRequest(server.port, "/inference", { method, headers: { "content-type": "application/json", ...headers }, body: body.subarray(0, size) }).response);
        for (const outcome of await Promise.allSettled(sent)) {
          assert.equal(outcome.status, "fulfilled", `${status}: ${outcome.status === "rejected" ? String(outcome.reason) : ""}`);
          const res = (outcome as PromiseFulfilledResult<{ status: number; text: string }>).value;
          assert.equal(res.status, status, res.text);
          assert.ok(res.text.startsWith('{"error":'), res.text);
        }
      }
    }
    assert.equal((await post(`${server.url}/inference`, { n: 1 })).status, 200);
  });

  test("a closing connection reads what its client still sends for a bounded time, then is closed", async () => {
    const wire = await Wire.open(server.port, true);
    wire.write(head("POST", "/inference", { "content-type": "application/json", "content-length": 100 * 1024 * 1024 }));
    void wire.trickle(Array.from({ length: 100 }, () => Buffer.alloc(16 * 1024, 0x20)), 100);
    const res = await wire.response();
    assertWireError(res, 413, "request body is too large: the limit is 10485760 bytes");
    assert.equal(res.headers.connection, "close");
    const closed = await Promise.race([wire.closed, sleep(8000).then(() => undefined)]);
    assert.notEqual(closed, undefined, "the connection was not closed");
    const lingered = closed! - res.at;
    assert.ok(lingered >= 1000, `closed ${lingered} ms after the answer: the client still sending could lose it to a reset`);
    assert.ok(lingered < 6000, `closed ${lingered} ms after the answer`);
  });

  test("Expect: 100-continue: 100 once the body is to be read; a body too large, or a request answered without its body, gets its answer at once", async () => {
    const small = await Wire.open(server.port);
    small.write(head("POST", "/inference", { "content-type": "application/json", "content-length": 8, expect: "100-continue" }));
    assert.equal((await small.response()).status, 100);
    small.write('{"n": 2}');
    const served = await small.response();
    assert.equal(served.status, 200, served.text);
    assert.deepEqual(served.json.echo, { n: 2 });
    small.close();
    const cases = [
      [413, head("POST", "/inference", { "content-type": "application/json", "content-length": 12 * 1024 * 1024, expect: "100-continue" })],
      [404, head("POST", "/nothing", { "content-length": 100, expect: "100-continue" })],
    ] as const;
    for (const [status, request] of cases) {
      const wire = await Wire.open(server.port);
      wire.write(request);
      const res = await wire.response();
      assert.equal(res.status, status, `${res.status} ${res.text}`);
      assert.equal(res.headers.connection, "close");
      await wire.closed;
    }
  });
});
