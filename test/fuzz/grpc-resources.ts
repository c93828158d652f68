/**
 * The gRPC resource fuzz: seeded floods of what costs the server without being a bad request:
 * idle TCP connections that never send a byte, calls opened with HEADERS alone, streams whose
 * client sends and never reads, health Watch calls for random names, and inference messages of
 * large repeated fields (gzipped or not), each of which must be answered. While they are held, a
 * good call must still be answered and the server's memory stay within 512 MiB of where it was;
 * once they are let go, the server must hold no request bytes.
 */
import { readFileSync } from "node:fs";
import { connect, type ClientHttp2Session } from "node:http2";
import { connect as tcp, type Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { V2Client } from "../grpc-helpers.js";
import { Random } from "./random.js";

/** What the run saw: how much of each flood it held, and what went wrong. */
export interface GrpcResourceResult {
  held: Record<string, number>;
  problems: string[];
}

// Protobuf by hand: a length-delimited field.
function field(number: number, value: Buffer | string): Buffer {
  const bytes = typeof value === "string" ? Buffer.from(value) : value;
  const length: number[] = [];
  for (let n = bytes.byteLength; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      length.push(n);
      break;
    }
    length.push((n % 128) | 0x80);
  }
  return Buffer.concat([Buffer.from([(number << 3) | 2, ...length]), bytes]);
}

function frame(message: Buffer, compressed = false): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt8(compressed ? 1 : 0, 0);
  prefix.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([prefix, message]);
}

// A ModelInferRequest for `model` whose one input has `n` repeated entries of a random contents field.
function repeated(r: Random, model: string, n: number): Buffer {
  const which = r.int(1, 8);
  // Packed varints (fields 1 to 5), floats, doubles, or n empty bytes_contents.
  const contents = which === 8 ? Buffer.from(Buffer.alloc(2 * n).map((_, i) => (i % 2 === 0 ? 0x42 : 0))) : field(which, Buffer.alloc(which === 6 ? 4 * n : which === 7 ? 8 * n : n));
  const input = Buffer.concat([field(1, "input"), field(2, which === 8 ? "BYTES" : "FP32"), field(5, contents)]);
  return Buffer.concat([field(1, model), field(5, input)]);
}

function rss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** Runs the floods against the gRPC port `port` of the server `pid`, whose REST API is at `url`. */
export async function runGrpcResourceFuzz(port: number, url: string, pid: number, seed: number): Promise<GrpcResourceResult> {
  const r = new Random(seed);
  const problems: string[] = [];
  const held: Record<string, number> = {};
  const sockets: Socket[] = [];
  const sessions: ClientHttp2Session[] = [];
  const session = () => {
    const s = connect(`http://127.0.0.1:${port}`);
    s.on("error", () => {});
    sessions.push(s);
    return s;
  };
  const call = (s: ClientHttp2Session, path: string, headers: Record<string, string> = {}) => {
    const stream = s.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    stream.on("error", () => {});
    return stream;
  };
  const start = rss(pid);
  try {
    held.idle = r.int(20, 60);
    for (let i = 0; i < held.idle; i++) sockets.push(tcp(port, "127.0.0.1").on("error", () => {}));
    held.headerOnly = r.int(100, 300);
    for (let i = 0; i < held.headerOnly; i++) call(sessions.length === 0 || i % 50 === 0 ? session() : sessions.at(-1)!, r.chance(0.5) ? "/inference.GRPCInferenceService/ModelInfer" : "/inference.GRPCInferenceService/ModelStreamInfer");
    held.nonReading = r.int(2, 5);
    for (let i = 0; i < held.nonReading; i++) {
      const stream = call(session(), "/inference.GRPCInferenceService/ModelStreamInfer");
      stream.pause();
      const message = frame(Buffer.concat([field(1, "mlp"), field(5, Buffer.concat([field(1, "input"), field(2, "FP32"), Buffer.from([0x1a, 2, 1, 4])])), field(7, Buffer.alloc(16))]));
      for (let k = 0; k < 500; k++) stream.write(message);
    }
    held.watchers = r.int(50, 300);
    const watches = session();
    for (let i = 0; i < held.watchers; i++) call(watches, "/grpc.health.v1.Health/Watch").end(frame(field(1, Buffer.from(r.bytes(r.int(0, 4096))))));
    held.repeated = r.int(4, 12);
    const big = session();
    const answered: Promise<string>[] = [];
    for (let i = 0; i < held.repeated; i++) {
      const gzip = r.chance(0.5);
      const message = repeated(r, r.pick(["mlp", "upper"]), r.int(1_000_000, 3_000_000));
      const stream = call(big, "/inference.GRPCInferenceService/ModelInfer", gzip ? { "grpc-encoding": "gzip" } : {});
      answered.push(new Promise((resolve) => {
        stream.on("response", (h) => h["grpc-status"] !== undefined && resolve(String(h["grpc-status"])));
        stream.on("trailers", (h) => resolve(String(h["grpc-status"])));
        stream.on("close", () => resolve("closed"));
        stream.resume();
      }));
      stream.end(frame(gzip ? gzipSync(message) : message, gzip));
    }
    // Refused before decoding (INVALID_ARGUMENT), or past a budget, or past its deadline: any end but none.
    const ends = await Promise.all(answered.map((a) => Promise.race([a, new Promise<string>((resolve) => setTimeout(() => resolve("none"), 30_000))])));
    for (const end of ends) if (end === "none") problems.push("a message of millions of repeated entries was not answered within 30 s");
    const client = new V2Client(port);
    try {
      await client.call("ModelInfer", { model_name: "mlp", inputs: [{ name: "input", datatype: "FP32", shape: [1, 4], contents: { fp32_contents: [1, 2, 3, 4] } }] }, { deadlineMs: 15_000 });
    } catch (err) {
      problems.push(`a good call failed while the floods were held: ${(err as Error).message}`);
    } finally {
      client.close();
    }
    const grown = rss(pid) - start;
    if (grown > 512 * 2 ** 20) problems.push(`the server's memory grew by ${Math.round(grown / 2 ** 20)} MiB while the floods were held`);
  } finally {
    for (const s of sockets) s.destroy();
    for (const s of sessions) s.destroy();
  }
  const deadline = Date.now() + 10_000;
  let bytes: string | undefined;
  while (Date.now() < deadline) {
    bytes = /^shoal_request_bytes_in_flight (\S+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1];
    if (bytes === "0") break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  if (bytes !== "0") problems.push(`shoal_request_bytes_in_flight is ${bytes} once the floods were let go`);
  return { held, problems };
}

/** The run as text. */
export function describeGrpcResourceRun(seed: number, result: GrpcResourceResult): string[] {
  return [`grpc resource fuzz: seed ${seed}, held ${Object.entries(result.held).map(([k, n]) => `${n} ${k}`).join(", ")}`, ...result.problems.map((p) => `FAIL ${p}`)];
}
