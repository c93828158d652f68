/**
 * The gRPC port under the limits the REST port has: connections that never open a call, idle
 * connections, calls that send HEADERS alone, calls past the limit per connection, clients that
 * never read their stream's answers, health watchers, messages of millions of repeated entries,
 * gzip that inflates past the byte budget, and a message still arriving when the drain begins.
 * Each is done on a real server over raw sockets and HTTP/2 sessions.
 */
import assert from "node:assert/strict";
import { connect, constants, type ClientHttp2Session } from "node:http2";
import { connect as tcp, createServer, type AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { metric, RUNTIME, sleep, waitFor, waitForMetric, type ServerProcess } from "./helpers.js";
import { fp32, freePort, readFp32, V2Client } from "./grpc-helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { CALL_SHARE } from "../src/grpc/call-arrival.js";
import { MAX_WATCHERS } from "../src/grpc/health-service.js";

const INFER = "/inference.GRPCInferenceService/ModelInfer";
const STREAM = "/inference.GRPCInferenceService/ModelStreamInfer";
const WATCH = "/grpc.health.v1.Health/Watch";

// The server's resident memory, in bytes (Linux).
function rss(server: ServerProcess): number {
  const status = readFileSync(`/proc/${server.proc.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

// Resolves once `socket` closes, false if it is still open after `ms`.
function closes(socket: { once(event: "close", fn: () => void): unknown }, ms = 8000): Promise<boolean> {
  return Promise.race([new Promise<boolean>((resolve) => socket.once("close", () => resolve(true))), sleep(ms).then(() => false)]);
}

// A gRPC frame of `message`: its compressed flag and length, then its bytes.
function frame(message: Buffer, compressed = false): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt8(compressed ? 1 : 0, 0);
  prefix.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([prefix, message]);
}

// Protobuf by hand: a length-delimited field, a string field.
function field(number: number, bytes: Buffer | string): Buffer {
  const value = typeof bytes === "string" ? Buffer.from(bytes) : bytes;
  const varint: number[] = [];
  for (let n = value.byteLength; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      varint.push(n);
      break;
    }
    varint.push((n % 128) | 0x80);
  }
  return Buffer.concat([Buffer.from([(number << 3) | 2, ...varint]), value]);
}

// A ModelInferRequest for `echo` with one FP32 input of `count` elements as raw contents.
function inferMessage(count: number): Buffer {
  const shape = Buffer.from([0x18, ...varintOf(count)]);
  const input = Buffer.concat([field(1, "x"), field(2, "FP32"), shape]);
  return Buffer.concat([field(1, "echo"), field(5, input), field(7, fp32(new Array(count).fill(0.5)))]);
}

function varintOf(n: number): number[] {
  const out: number[] = [];
  for (let v = n; ; v = Math.floor(v / 128)) {
    if (v < 128) return [...out, v];
    out.push((v % 128) | 0x80);
  }
}

// A raw call, its answer's headers, trailers and bytes gathered as they come.
function open(session: ClientHttp2Session, path: string, headers: Record<string, string> = {}) {
  const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
  const seen = { status: undefined as string | undefined, message: "", data: [] as Buffer[], closed: false, rstCode: -1 };
  stream.on("error", () => {});
  stream.on("response", (h) => {
    if (h["grpc-status"] !== undefined) [seen.status, seen.message] = [String(h["grpc-status"]), decodeURIComponent(String(h["grpc-message"] ?? ""))];
  });
  stream.on("trailers", (h) => ([seen.status, seen.message] = [String(h["grpc-status"]), decodeURIComponent(String(h["grpc-message"] ?? ""))]));
  stream.on("data", (chunk: Buffer) => seen.data.push(chunk));
  stream.on("close", () => {
    seen.closed = true;
    seen.rstCode = stream.rstCode ?? -1;
  });
  return { stream, seen };
}

function session(port: number, settings: Record<string, number> = {}): ClientHttp2Session {
  const s = connect(`http://127.0.0.1:${port}`, { settings });
  s.on("error", () => {});
  return s;
}

describe("gRPC connections and calls under the REST port's limits", () => {
  const echo = echoServer({}, ["--headers-timeout", "500", "--request-timeout", "1000", "--max-connections", "4", "--grpc-max-streams", "8", "--grpc-idle-timeout", "1500"]);

  test("a TCP connection that never sends a byte is closed after --headers-timeout, and is sent nothing", async () => {
    const socket = tcp(echo.port, "127.0.0.1");
    socket.on("error", () => {});
    // It reads, so that it sees the connection close and anything sent before.
    let received = 0;
    socket.on("data", (chunk: Buffer) => (received += chunk.length));
    const start = performance.now();
    assert.ok(await closes(socket), "the connection was kept open");
    const ms = performance.now() - start;
    socket.destroy();
    assert.ok(ms >= 400 && ms < 8000, `closed after ${Math.round(ms)} ms`);
    // No HTTP/2 session is made for a connection before its first byte: no SETTINGS, no GOAWAY.
    assert.equal(received, 0, "bytes sent to a connection that never spoke");
  });

  test("a client whose first bytes come late, a byte at first, is served once they come", async () => {
    // A relay that holds the client's first chunk 200 ms, then sends its first byte, and the
    // rest 100 ms later.
    const relay = createServer((client) => {
      const upstream = tcp(echo.port, "127.0.0.1");
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
      upstream.pipe(client);
      client.once("data", (first: Buffer) => {
        client.pause();
        setTimeout(() => {
          upstream.write(first.subarray(0, 1));
          setTimeout(() => {
            upstream.write(first.subarray(1));
            client.pipe(upstream);
            client.resume();
          }, 100);
        }, 200);
      });
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const client = new V2Client((relay.address() as AddressInfo).port);
    try {
      assert.deepEqual(await client.call("ServerLive", {}, { deadlineMs: 5000 }), { live: true });
      const answer = await client.call("ModelInfer", { model_name: "echo", inputs: [{ name: "x", datatype: "FP32", shape: [2] }], raw_input_contents: [fp32([1, 2.5])] }, { deadlineMs: 5000 });
      const x = (answer.outputs as { name: string }[]).findIndex((o) => o.name === "x_out");
      assert.deepEqual(readFp32(answer.raw_output_contents[x]), [1, 2.5]);
    } finally {
      client.close();
      relay.close();
    }
  });

  test("--max-connections silent sockets do not shut the port: they are closed, and a client is answered", async () => {
    const silent = Array.from({ length: 4 }, () => {
      const socket = tcp(echo.port, "127.0.0.1");
      socket.on("error", () => {});
      socket.resume();
      return closes(socket).finally(() => socket.destroy());
    });
    assert.deepEqual(await Promise.all(silent), [true, true, true, true], "silent connections kept open");
    const client = new V2Client(echo.port);
    try {
      assert.deepEqual(await client.call("ServerLive", {}, { deadlineMs: 5000 }), { live: true });
    } finally {
      client.close();
    }
  });

  test("a connection with no call open is closed with GOAWAY after --grpc-idle-timeout", async () => {
    const s = session(echo.port);
    const { stream, seen } = open(s, "/inference.GRPCInferenceService/ServerLive");
    stream.end(frame(Buffer.alloc(0)));
    await waitFor("the answer", () => seen.status);
    assert.equal(seen.status, "0");
    const goaway = await new Promise<number>((resolve) => s.once("goaway", (code) => resolve(code)));
    assert.equal(goaway, constants.NGHTTP2_NO_ERROR);
    s.destroy();
  });

  test("a call that sends HEADERS alone gets DEADLINE_EXCEEDED after --request-timeout, unary or streaming, and its stream is closed", async () => {
    const s = session(echo.port);
    const calls = [open(s, INFER), open(s, STREAM)];
    const start = performance.now();
    await waitFor("both answered", () => (calls.every((c) => c.seen.closed) ? true : undefined), 10_000);
    const ms = performance.now() - start;
    for (const { seen } of calls) {
      assert.equal(seen.status, "4", seen.message);
      assert.match(seen.message, /--request-timeout/);
    }
    assert.ok(ms >= 800 && ms < 8000, `after ${Math.round(ms)} ms`);
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
    s.destroy();
  });

  test("a message begun and never finished gets DEADLINE_EXCEEDED too", async () => {
    const s = session(echo.port);
    const { stream, seen } = open(s, INFER);
    stream.write(frame(inferMessage(16)).subarray(0, 20));
    await waitFor("answered", () => (seen.closed ? true : undefined), 10_000);
    assert.equal(seen.status, "4", seen.message);
    s.destroy();
  });

  test("--grpc-max-streams is the connection's SETTINGS_MAX_CONCURRENT_STREAMS, and streams past it are refused", async () => {
    const s = session(echo.port);
    const settings = new Promise<{ maxConcurrentStreams?: number }>((resolve) => s.once("remoteSettings", resolve));
    // Sent with the connection's preface, before the client has the server's SETTINGS.
    const calls = Array.from({ length: 12 }, () => open(s, STREAM));
    assert.equal((await settings).maxConcurrentStreams, 8);
    await waitFor("every call ended", () => (calls.every((c) => c.seen.closed) ? true : undefined));
    const refused = calls.filter((c) => c.seen.status === undefined);
    assert.deepEqual(refused.map((c) => c.seen.rstCode), [constants.NGHTTP2_REFUSED_STREAM, constants.NGHTTP2_REFUSED_STREAM, constants.NGHTTP2_REFUSED_STREAM, constants.NGHTTP2_REFUSED_STREAM]);
    assert.deepEqual(calls.filter((c) => c.seen.status !== undefined).map((c) => c.seen.status), new Array(8).fill("4"));
    s.destroy();
  });
});

describe("each open gRPC call holds its share of --max-inflight-bytes", () => {
  const echo = echoServer({}, ["--max-request-size", "32768", "--max-inflight-bytes", String(8 * CALL_SHARE), "--request-timeout", "30000"]);

  test("calls opened with HEADERS alone beyond the budget are reset; closing them returns it", { skip: RUNTIME === "bun" ? "Bun's HTTP/2 server resets the connection's other streams too (README: On Bun)" : false }, async () => {
    const s = session(echo.port);
    const calls = Array.from({ length: 12 }, () => open(s, STREAM));
    await waitFor("the calls past the budget reset", () => (calls.filter((c) => c.seen.closed).length >= 4 ? true : undefined));
    assert.deepEqual(
      calls.filter((c) => c.seen.closed).map((c) => c.seen.rstCode),
      [constants.NGHTTP2_ENHANCE_YOUR_CALM, constants.NGHTTP2_ENHANCE_YOUR_CALM, constants.NGHTTP2_ENHANCE_YOUR_CALM, constants.NGHTTP2_ENHANCE_YOUR_CALM],
    );
    assert.equal(await metric(echo.server.url, "shoal_request_bytes_in_flight"), 8 * CALL_SHARE);
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });
});

// A gRPC message's frames in `data`: each message's bytes.
function messages(data: Buffer[]): Buffer[] {
  const bytes = Buffer.concat(data);
  const out: Buffer[] = [];
  for (let at = 0; at + 5 <= bytes.length; ) {
    const length = bytes.readUInt32BE(at + 1);
    if (at + 5 + length > bytes.length) break;
    out.push(bytes.subarray(at + 5, at + 5 + length));
    at += 5 + length;
  }
  return out;
}

describe("gRPC health watchers, large repeated fields and gzip", () => {
  const MiB = 2 ** 20;
  const echo = echoServer({}, ["--max-request-size", String(8 * MiB), "--max-inflight-bytes", String(16 * MiB), "--grpc-max-streams", "1000", "--request-timeout", "60000"]);

  test("Health/Watch: a name not served is SERVICE_UNKNOWN, watchers past the bound are refused, and a watcher's leaving frees its place", async () => {
    const s = session(echo.port);
    const other = session(echo.port);
    const watch = (name: string, on = s) => {
      const call = open(on, WATCH);
      call.stream.end(frame(field(1, name)));
      return call;
    };
    const known = watch("");
    const unknown = watch("x".repeat(8192));
    await waitFor("the first statuses", () => (messages(known.seen.data).length > 0 && messages(unknown.seen.data).length > 0 ? true : undefined));
    // HealthCheckResponse { status: SERVING (1) } and { status: SERVICE_UNKNOWN (3) }.
    assert.deepEqual([...messages(known.seen.data)[0]!], [0x08, 1]);
    assert.deepEqual([...messages(unknown.seen.data)[0]!], [0x08, 3]);
    assert.equal(unknown.seen.closed, false, "an unknown name's Watch stays open, as the protocol says");
    const more = Array.from({ length: MAX_WATCHERS - 2 }, (_, i) => watch(`name-${i}-${"y".repeat(1000)}`));
    await waitFor("every watcher's first status", () => (more.every((c) => c.seen.data.length > 0) ? true : undefined), 20_000);
    // On a second connection: the first has all its --grpc-max-streams open.
    const past = watch("one too many", other);
    await waitFor("refused", () => past.seen.status);
    assert.equal(past.seen.status, "8", past.seen.message);
    for (const call of [unknown, ...more]) call.stream.close();
    await sleep(500);
    const again = watch("after", other);
    await waitFor("a new watcher's status", () => (messages(again.seen.data).length > 0 ? true : undefined));
    assert.deepEqual([...messages(again.seen.data)[0]!], [0x08, 3]);
    s.destroy();
    other.destroy();
  });

  test("Watch calls with long names, cancelled, leave nothing behind", async () => {
    const before = rss(echo.server);
    for (let round = 0; round < 6; round++) {
      const s = session(echo.port);
      const calls = Array.from({ length: 100 }, (_, i) => {
        const call = open(s, WATCH);
        call.stream.end(frame(field(1, `${round}-${i}-${"z".repeat(8192)}`)));
        return call;
      });
      await waitFor("statuses", () => (calls.every((c) => c.seen.data.length > 0) ? true : undefined));
      assert.ok(calls.every((c) => c.seen.status === undefined));
      s.destroy();
    }
    assert.ok(rss(echo.server) - before < 200 * MiB, `RSS grew by ${Math.round((rss(echo.server) - before) / MiB)} MiB`);
    assert.equal(echo.server.exited, false);
  });

  test("ModelInfer with millions of empty bytes_contents, gzipped, is refused before it is decoded", async () => {
    // InferTensorContents { bytes_contents: "" } two million times: 4 MB, a few KiB gzipped.
    const contents = Buffer.alloc(2 * 2_000_000);
    for (let i = 0; i < contents.length; i += 2) contents[i] = 0x42;
    const input = Buffer.concat([field(1, "text"), field(2, "BYTES"), Buffer.from([0x18, ...varintOf(2_000_000)]), field(5, contents)]);
    const message = gzipSync(Buffer.concat([field(1, "echo"), field(5, input)]));
    assert.ok(message.byteLength < 64 * 1024, `${message.byteLength} bytes gzipped`);
    const before = rss(echo.server);
    const s = session(echo.port);
    const start = performance.now();
    const calls = Array.from({ length: 8 }, () => {
      const call = open(s, INFER, { "grpc-encoding": "gzip" });
      call.stream.end(frame(message, true));
      return call;
    });
    await waitFor("answered", () => (calls.every((c) => c.seen.status !== undefined) ? true : undefined), 30_000);
    const ms = performance.now() - start;
    for (const { seen } of calls) {
      assert.equal(seen.status, "3", seen.message);
      assert.match(seen.message, /--max-bytes-elements/);
    }
    assert.ok(ms < 10_000, `answered in ${Math.round(ms)} ms`);
    assert.ok(rss(echo.server) - before < 150 * MiB, `RSS grew by ${Math.round((rss(echo.server) - before) / MiB)} MiB`);
    s.destroy();
  });

  test("a gzipped message is counted in the byte budget as it inflates, not as it came: past the budget, RESOURCE_EXHAUSTED", async () => {
    // A small request padded with 6 MiB of an unknown field (protobuf skips it), a few KiB
    // gzipped: its body is small, its inflated message is not. Two of them at once fit the 16 MiB
    // budget, four do not.
    const input = Buffer.concat([field(1, "x"), field(2, "FP32"), Buffer.from([0x18, 1])]);
    // parameters { sleepMs: 1000 }: the requests stay in flight together.
    const sleep1s = field(4, Buffer.concat([field(1, "sleepMs"), field(2, Buffer.from([0x10, ...varintOf(1000)]))]));
    const message = gzipSync(Buffer.concat([field(1, "echo"), sleep1s, field(5, input), field(7, fp32([1])), field(15, Buffer.alloc(6 * MiB))]));
    assert.ok(message.byteLength < 64 * 1024);
    const s = session(echo.port);
    const calls = Array.from({ length: 4 }, () => {
      const call = open(s, INFER, { "grpc-encoding": "gzip" });
      call.stream.end(frame(message, true));
      return call;
    });
    await waitFor("answered", () => (calls.every((c) => c.seen.status !== undefined || c.seen.closed) ? true : undefined), 30_000);
    const statuses = calls.map((c) => c.seen.status).sort();
    assert.deepEqual(statuses, ["0", "0", "8", "8"], calls.map((c) => c.seen.message).join("; "));
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });
});

/** An echo model served over gRPC to the tests of one suite: started before them, stopped after. */
function echoServer(settings: Record<string, unknown>, args: string[]): { server: ServerProcess; port: number } {
  const repo = new ModelRepo();
  const echo = {} as { server: ServerProcess; port: number };
  before(async () => {
    repo.module("echo", "echo.ts", settings);
    echo.port = await freePort();
    echo.server = await serveRepository(repo.dir, ["--grpc-port", String(echo.port), ...args]);
  });
  after(async () => {
    await echo.server?.stop();
    repo.remove();
  });
  return echo;
}

describe("a ModelStreamInfer client that never reads", () => {
  const MiB = 2 ** 20;
  // A batch waits 300 ms to fill: requests sent together are answered together.
  const echo = echoServer({ maxBatchSize: 64, maxWaitMs: 300 }, ["--max-request-size", String(MiB), "--max-inflight-bytes", String(32 * MiB)]);

  test("ModelStreamInfer: a client that sends and never reads is read no further, and the server's memory stays within a bound", async () => {
    const before = rss(echo.server);
    // The client's window stays at 64 KiB: what it does not read, the server cannot send.
    const s = session(echo.port);
    const { stream } = open(s, STREAM);
    stream.pause();
    const request = frame(inferMessage(64 * 1024));
    let sent = 0;
    for (; sent < 2000; sent++) {
      if (stream.write(request)) continue;
      const drained = await Promise.race([new Promise((resolve) => stream.once("drain", () => resolve(true))), sleep(3000)]);
      if (drained !== true) break;
    }
    assert.ok(sent < 1000, `${sent} requests of 256 KiB sent before the server stopped reading`);
    assert.ok(rss(echo.server) - before < 300 * MiB, `RSS grew by ${Math.round((rss(echo.server) - before) / MiB)} MiB`);
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });

  test("ModelStreamInfer: the answers of requests already under way when it stopped reading are bounded too: past four times --max-request-size unread, the stream is reset", async () => {
    // Many requests, all read while their batch waits to fill: their answers come together and
    // pass the hard bound at once.
    const s = session(echo.port);
    const { stream, seen } = open(s, STREAM);
    stream.pause();
    const request = frame(inferMessage(64 * 1024));
    stream.write(Buffer.concat(new Array(40).fill(request)));
    await sleep(2000);
    // Read now, to see how the stream ended (a paused stream does not tell).
    stream.resume();
    await waitFor("the stream reset", () => (seen.closed ? true : undefined), 10_000);
    assert.equal(seen.rstCode, constants.NGHTTP2_ENHANCE_YOUR_CALM);
    assert.ok(messages(seen.data).length < 40, `${messages(seen.data).length} answers`);
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });

  test("ModelStreamInfer: a client that reads late gets every answer of a stream that stayed within the bound", async () => {
    const s = session(echo.port);
    const { stream, seen } = open(s, STREAM);
    stream.pause();
    const request = frame(inferMessage(64 * 1024));
    const sent = 8;
    for (let i = 0; i < sent; i++) {
      stream.write(request);
      await sleep(50);
    }
    await sleep(500);
    assert.equal(seen.closed, false);
    stream.resume();
    stream.end();
    await waitFor("the stream's end", () => seen.status, 60_000);
    assert.equal(seen.status, "0", seen.message);
    assert.equal(messages(seen.data).length, sent);
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });
});

describe("ModelStreamInfer: what a stream holds", () => {
  const MiB = 2 ** 20;
  // A batch waits 300 ms to fill, so that a stream's requests stay under way together.
  const echo = echoServer({ maxBatchSize: 64, maxWaitMs: 300 }, ["--max-request-size", String(MiB), "--max-inflight-bytes", String(2 * MiB)]);

  test("no more than 32 requests of one stream are under way at once; the rest wait in the stream, and all are answered", async () => {
    const s = session(echo.port);
    const { stream, seen } = open(s, STREAM);
    const request = frame(inferMessage(4));
    stream.write(Buffer.concat(new Array(100).fill(request)));
    stream.end();
    const most: number[] = [];
    const sampling = setInterval(() => void metric(echo.server.url, "shoal_requests_in_flight").then((v) => most.push(v ?? 0)), 50);
    try {
      await waitFor("the stream's end", () => seen.status, 30_000);
    } finally {
      clearInterval(sampling);
    }
    assert.equal(seen.status, "0", seen.message);
    assert.equal(messages(seen.data).length, 100);
    assert.ok(Math.max(...most) <= 32, `at most ${Math.max(...most)} in flight`);
    assert.ok(Math.max(...most) >= 16, `the stream's requests were batched together: ${Math.max(...most)} in flight at most`);
    s.destroy();
  });

  test("the answers left unread on all streams together are bounded by --max-inflight-bytes: the stream that passes it is reset, the others keep theirs", async () => {
    const s = session(echo.port);
    // Each stream's answers stay under its own bounds (1 MiB to stop reading, 4 MiB to reset).
    const send = async (call: ReturnType<typeof open>) => {
      call.stream.pause();
      for (let i = 0; i < 5; i++) {
        call.stream.write(frame(inferMessage(64 * 1024)));
        await sleep(20);
      }
    };
    const first = open(s, STREAM);
    await send(first);
    await sleep(1000);
    const second = open(s, STREAM);
    await send(second);
    await sleep(1000);
    // Read now, to see how each stream stands (a paused stream does not tell).
    second.stream.resume();
    await waitFor("the second stream reset", () => (second.seen.closed ? true : undefined), 10_000);
    assert.equal(second.seen.rstCode, constants.NGHTTP2_ENHANCE_YOUR_CALM);
    assert.equal(first.seen.closed, false, "the first stream is held, not reset");
    first.stream.resume();
    first.stream.end();
    await waitFor("the first stream's end", () => first.seen.status, 30_000);
    assert.equal(first.seen.status, "0", first.seen.message);
    assert.equal(messages(first.seen.data).length, 5);
    s.destroy();
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v === 0);
  });
});

describe("gRPC on SIGTERM: a message still arriving is in flight from its first byte", () => {
  const echo = echoServer({}, ["--timeout", "10000"]);

  test("its call is answered, then the server exits", async () => {
    const s = session(echo.port);
    const { stream, seen } = open(s, INFER);
    const message = frame(inferMessage(1024));
    stream.write(message.subarray(0, 100));
    // The server has the call and its first bytes.
    await waitForMetric(echo.server.url, "shoal_request_bytes_in_flight", {}, (v) => v >= CALL_SHARE + 100);
    echo.server.proc.kill("SIGTERM");
    await echo.server.waitForLog((l) => l.msg === "draining");
    await sleep(500);
    stream.end(message.subarray(100));
    await waitFor("answered", () => seen.status ?? (seen.closed ? `closed ${seen.rstCode}` : undefined), 10_000).catch((err) => {
      throw new Error(`${err.message}\n${echo.server.describe()}`);
    });
    assert.equal(seen.status, "0", seen.message);
    assert.equal(messages(seen.data).length, 1);
    assert.equal(await echo.server.exitCode(), 0);
    s.destroy();
  });
});
