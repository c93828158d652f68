/**
 * What the flood run's attackers do (bench/scenarios/flood.ts runs them in a process of their own,
 * bench/tools/flood-attackers.ts, so that their work is not the normal clients' event loop's).
 * Each attack keeps `size` slots busy: a slot holds a resource of the server's (a connection, a
 * call) for as long as the server lets it, and when the server ends it, opens another after
 * `reopenMs`, as a patient attacker does. Every attack counts what it opened, what the server
 * closed and how long it was held; those that get answers count them by status.
 */
import { connect as connectHttp2, constants, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { connect, type Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { KeepAliveConnection, requestBytes } from "../../test/fuzz/raw-http.js";
import { definition } from "../../test/grpc-helpers.js";

/** The attacks, by name: the REST port's, then the gRPC port's. */
export const ATTACKS = ["idle-rest", "slow-headers", "slow-bodies", "gzip-rest", "idle-grpc", "header-only", "non-reading", "gzip-grpc"] as const;
export type AttackName = (typeof ATTACKS)[number];

/** Which port an attack goes to. */
export function portOf(name: AttackName): "rest" | "grpc" {
  return ATTACKS.indexOf(name) < 4 ? "rest" : "grpc";
}

/** Everything the attackers need to know. */
export interface AttackSettings {
  host: string;
  restPort: number;
  grpcPort: number;
  /** The model the requests name, an echo: its answer is as large as its request. */
  model: string;
  /** Slots of each attack (0: not run). */
  sizes: Record<AttackName, number>;
  /** Wait this long before opening a slot's next resource. */
  reopenMs: number;
  /** A slow client sends one byte this often. */
  dripMs: number;
  /** The body length a slow body declares (within the server's limit, so that it is read). */
  slowBodyBytes: number;
  /** Header-only calls per connection. */
  streamsPerConnection: number;
  /** Requests a non-reading client sends on its stream, and each one's tensor size. */
  streamRequests: number;
  streamRequestBytes: number;
  /** A gzip body's inflated size, and how often each gzip slot sends one. */
  gzipInflatedBytes: number;
  gzipEveryMs: number;
}

/** What one attack did. */
export interface AttackStats {
  name: AttackName;
  port: "rest" | "grpc";
  size: number;
  /** Connections opened (the calls on them are counted in `counts`). */
  opened: number;
  /** Of them, ended by the server (closed, reset, answered) before the attack stopped. */
  endedByServer: number;
  /** Of those, ended within 250 ms of opening (a connection past the cap is closed at once). */
  endedAtOnce: number;
  /** Still held when the attack stopped. */
  heldAtStop: number;
  /** Longest any resource was held, and the mean of those the server ended, in ms. */
  longestHeldMs: number;
  meanEndedMs: number;
  /** Answers by status (HTTP status, or `grpc <code>`), and errors by kind. */
  counts: Record<string, number>;
}

// The bookkeeping every attack shares.
class Ledger {
  readonly stats: AttackStats;
  readonly #live = new Map<number, { since: number; release: () => void }>();
  #next = 0;
  #ended = 0;
  stopped = false;

  constructor(name: AttackName, size: number) {
    this.stats = { name, port: portOf(name), size, opened: 0, endedByServer: 0, endedAtOnce: 0, heldAtStop: 0, longestHeldMs: 0, meanEndedMs: 0, counts: {} };
  }

  count(key: string): void {
    this.stats.counts[key] = (this.stats.counts[key] ?? 0) + 1;
  }

  // A resource opened; the returned function records its end (by the server, unless stopping).
  opened(release: () => void): () => void {
    const id = this.#next++;
    const since = performance.now();
    this.stats.opened++;
    this.#live.set(id, { since, release });
    return () => {
      if (!this.#live.delete(id)) return;
      const held = performance.now() - since;
      this.stats.longestHeldMs = Math.max(this.stats.longestHeldMs, held);
      if (this.stopped) return;
      this.stats.endedByServer++;
      if (held < 250) this.stats.endedAtOnce++;
      this.stats.meanEndedMs += (held - this.stats.meanEndedMs) / ++this.#ended;
    };
  }

  stop(): AttackStats {
    this.stopped = true;
    const now = performance.now();
    this.stats.heldAtStop = this.#live.size;
    for (const { since, release } of this.#live.values()) {
      this.stats.longestHeldMs = Math.max(this.stats.longestHeldMs, now - since);
      release();
    }
    this.#live.clear();
    return this.stats;
  }
}

/** A running attack. */
export interface Attack {
  /** Lets go of everything it holds and says what it did. */
  stop(): AttackStats;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Runs `size` slots of `hold` (which resolves once its resource is gone) until stopped.
function slots(ledger: Ledger, size: number, reopenMs: number, hold: (ledger: Ledger) => Promise<void>): Attack {
  const slot = async () => {
    while (!ledger.stopped) {
      await hold(ledger).catch((err: Error) => ledger.count(`error ${err.message}`));
      await sleep(reopenMs);
    }
  };
  for (let i = 0; i < size; i++) void slot();
  return { stop: () => ledger.stop() };
}

// A TCP connection that is held until it closes; `onConnect` starts what is sent on it.
function heldSocket(ledger: Ledger, port: number, host: string, onConnect: (socket: Socket) => void): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    let ended: (() => void) | undefined;
    socket.on("connect", () => {
      ended = ledger.opened(() => socket.destroy());
      onConnect(socket);
    });
    socket.on("data", (chunk: Buffer) => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(chunk.toString("latin1", 0, 16))?.[1];
      if (status !== undefined) ledger.count(status);
    });
    socket.on("error", (err: NodeJS.ErrnoException) => ledger.count(`error ${err.code ?? err.message}`));
    socket.on("close", () => {
      ended?.();
      resolve();
    });
  });
}

// Writes one byte every `ms` until the socket closes.
function drip(socket: Socket, ms: number): void {
  const timer = setInterval(() => socket.write("a"), ms);
  socket.on("close", () => clearInterval(timer));
}

// An HTTP/2 session held until it closes; `onConnect` opens its streams.
function heldSession(ledger: Ledger, port: number, host: string, onConnect: (session: ClientHttp2Session) => void): Promise<void> {
  return new Promise((resolve) => {
    const session = connectHttp2(`http://${host}:${port}`);
    let ended: (() => void) | undefined;
    session.on("connect", () => {
      ended = ledger.opened(() => session.destroy());
      onConnect(session);
    });
    session.on("error", (err: NodeJS.ErrnoException) => ledger.count(`error ${err.code ?? err.message}`));
    session.on("close", () => {
      ended?.();
      resolve();
    });
  });
}

// A gRPC call's HEADERS on `session`; `compressed` says its message will be gzipped.
function grpcCall(session: ClientHttp2Session, method: string, compressed = false): ClientHttp2Stream {
  return session.request({
    ":method": "POST",
    ":path": `/inference.GRPCInferenceService/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
    ...(compressed ? { "grpc-encoding": "gzip", "grpc-accept-encoding": "gzip" } : {}),
  });
}

// Counts how a call ended: its grpc-status, or the code it was reset with.
function countEnd(ledger: Ledger, stream: ClientHttp2Stream): void {
  let status: string | undefined;
  const read = (headers: Record<string, unknown>) => (status ??= headers["grpc-status"] === undefined ? undefined : String(headers["grpc-status"]));
  stream.on("response", read);
  stream.on("trailers", read);
  stream.on("error", () => {});
  stream.on("close", () => {
    if (ledger.stopped) return;
    ledger.count(status !== undefined ? `grpc ${status}` : stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR ? `reset ${stream.rstCode}` : "closed");
  });
}

/** A gRPC message frame: 5 bytes of prefix (compressed flag, length) and the message. */
function grpcFrame(message: Buffer, compressed: boolean): Buffer {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame.writeUInt8(compressed ? 1 : 0, 0);
  frame.writeUInt32BE(message.byteLength, 1);
  message.copy(frame, 5);
  return frame;
}

/** A serialized ModelInferRequest for `model` with one tensor `x` in raw contents. */
export function inferMessage(model: string, x: { datatype: string; shape: number[]; raw: Buffer }): Buffer {
  const service = definition["inference.GRPCInferenceService"] as unknown as Record<string, { requestSerialize(m: object): Buffer }>;
  return service.ModelInfer!.requestSerialize({ model_name: model, inputs: [{ name: "x", datatype: x.datatype, shape: x.shape }], raw_input_contents: [x.raw] });
}

// A message of `bytes` zeros as a UINT8 tensor.
const zerosMessage = (model: string, bytes: number) => inferMessage(model, { datatype: "UINT8", shape: [bytes], raw: Buffer.alloc(bytes) });

/** Starts every attack whose size is above 0. */
export function startAttacks(s: AttackSettings): Map<AttackName, Attack> {
  const { host, restPort, grpcPort } = s;
  const path = `/v2/models/${s.model}/infer`;
  const zeros = gzipSync(Buffer.alloc(s.gzipInflatedBytes), { level: 9 });
  const gzipRest = requestBytes("POST", path, { "content-type": "application/json", "content-encoding": "gzip" }, zeros);
  const gzipGrpc = grpcFrame(gzipSync(zerosMessage(s.model, s.gzipInflatedBytes), { level: 9 }), true);
  const streamFrame = grpcFrame(zerosMessage(s.model, s.streamRequestBytes), false);
  const holds: Record<AttackName, (ledger: Ledger) => Promise<void>> = {
    // A connection that never sends a byte.
    "idle-rest": (l) => heldSocket(l, restPort, host, () => {}),
    "idle-grpc": (l) => heldSocket(l, grpcPort, host, () => {}),
    // Slowloris: a request line, then a header that never ends, a byte at a time.
    "slow-headers": (l) =>
      heldSocket(l, restPort, host, (socket) => {
        socket.write(`POST ${path} HTTP/1.1\r\nhost: ${host}\r\nx-slow: `);
        drip(socket, s.dripMs);
      }),
    // Whole headers, a body that never ends: 1 KiB, then a byte at a time.
    "slow-bodies": (l) =>
      heldSocket(l, restPort, host, (socket) => {
        socket.write(`POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${s.slowBodyBytes}\r\n\r\n${" ".repeat(1024)}`);
        drip(socket, s.dripMs);
      }),
    // Small bodies that inflate past the limit, one every gzipEveryMs on a kept-alive connection.
    "gzip-rest": async (l) => {
      const conn = new KeepAliveConnection(restPort);
      const ended = l.opened(() => conn.destroy());
      try {
        while (!l.stopped && !conn.closed) {
          l.count(String((await conn.send({ bytes: gzipRest })).status));
          await sleep(s.gzipEveryMs);
        }
      } catch (err) {
        if (!l.stopped) l.count(`error ${(err as Error).message}`);
      } finally {
        ended();
        conn.destroy();
      }
    },
    // Calls that send HEADERS and never a message, streamsPerConnection of them on a connection;
    // one the server ends is opened again.
    "header-only": (l) =>
      heldSession(l, grpcPort, host, (session) => {
        const open = () => {
          if (l.stopped || session.closed || session.destroyed) return;
          const stream = grpcCall(session, "ModelInfer");
          l.count("calls opened");
          countEnd(l, stream);
          stream.on("close", () => void sleep(s.reopenMs).then(open));
        };
        for (let i = 0; i < s.streamsPerConnection; i++) open();
      }),
    // A ModelStreamInfer call that sends its requests and never reads an answer.
    "non-reading": (l) =>
      heldSession(l, grpcPort, host, (session) => {
        const stream = grpcCall(session, "ModelStreamInfer");
        countEnd(l, stream);
        stream.pause();
        // As flow control lets it: written all at once, the requests would pass the client's own
        // session memory bound (10 MB), and its session would reset the stream itself.
        let sent = 0;
        const more = () => {
          while (sent < s.streamRequests) {
            sent++;
            if (!stream.write(streamFrame)) return;
          }
        };
        stream.on("drain", more);
        more();
        // The session goes when its call ends, so that the slot opens another.
        stream.on("close", () => session.close());
      }),
    // Messages gzipped that inflate past the limit, one every gzipEveryMs on a connection.
    "gzip-grpc": (l) =>
      heldSession(l, grpcPort, host, (session) => {
        const call = () => {
          if (l.stopped || session.closed || session.destroyed) return;
          const stream = grpcCall(session, "ModelInfer", true);
          countEnd(l, stream);
          stream.resume();
          stream.on("close", () => void sleep(s.gzipEveryMs).then(call));
          stream.end(gzipGrpc);
        };
        call();
      }),
  };
  const running = new Map<AttackName, Attack>();
  for (const name of ATTACKS) {
    const size = s.sizes[name];
    if (size > 0) running.set(name, slots(new Ledger(name, size), size, s.reopenMs, holds[name]));
  }
  return running;
}
