/**
 * The gRPC fuzz: seeded calls to the V2 gRPC service of the fuzz server. Inference requests near
 * what the models take and then bent (datatypes, shapes, contents in the wrong field, raw contents
 * that do not match), large requests (several raw tensors of any datatype in a message of its own
 * buffer, which moves to the worker; large answers, gzipped to gzip-compressed calls), well-formed
 * messages cut or with bytes flipped, random bytes as any method's message, unknown methods,
 * streams of such requests, messages over the size limit, gzip-compressed calls, and random
 * metadata (tokens, request ids, odd keys, encoding headers, binary values).
 *
 * Every call must end with a status (none hangs, none resets) that the error table maps to, or
 * UNIMPLEMENTED for a method the service has not, or INTERNAL only as @grpc/grpc-js answers a
 * compressed message it cannot inflate; a stream's errors, an unreadable message's among them, go
 * in its messages.
 */
import * as grpc from "@grpc/grpc-js";
import type { MethodDefinition } from "@grpc/proto-loader";
import { ERRORS } from "../../src/errors.js";
import { definition } from "../grpc-helpers.js";
import { Random } from "./random.js";

const SERVICE = "inference.GRPCInferenceService";
const service = definition[SERVICE] as unknown as Record<string, MethodDefinition<object, object>>;
const METHODS = Object.keys(service);
const DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16", "fp32", ""];
const CONTENTS = ["bool_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents", "fp32_contents", "fp64_contents", "bytes_contents"];

/** One generated call. */
export interface GrpcFuzzCall {
  index: number;
  kind: string;
  method: string;
  /** The messages sent: one for a unary call, any number on a stream. */
  messages: Buffer[];
  stream: boolean;
  metadata: [string, string | Buffer][];
  gzip: boolean;
}

/** How a call ended. */
export interface GrpcOutcome {
  call: GrpcFuzzCall;
  code: number | undefined;
  details: string;
  /** Messages a stream answered with an error in them. */
  streamErrors: number;
}

/** The codes a call may end with: OK, the error table's, UNIMPLEMENTED, and CANCELLED for a call the client gave up. */
const ALLOWED = new Set<number>([grpc.status.OK, grpc.status.UNIMPLEMENTED, ...Object.values(ERRORS).map((e) => grpc.status[e.grpc])]);
// INTERNAL as @grpc/grpc-js answers a message it cannot inflate: not a failure of Shoal's. (One
// that is not valid protobuf is Shoal's to answer: INVALID_ARGUMENT.)
const TRANSPORT_INTERNAL = /^(Failed to decompress message|Invalid grpc-timeout)/;

function elements(r: Random, field: string, n: number): unknown[] {
  return Array.from({ length: n }, () => {
    if (field === "bool_contents") return r.chance(0.5);
    if (field === "bytes_contents") return r.bytes(r.skewed(0, 16));
    if (field === "int64_contents" || field === "uint64_contents") return r.pick(["0", "-1", "9223372036854775807", "18446744073709551615", String(r.int(-1000, 1000))]);
    if (field === "fp32_contents" || field === "fp64_contents") return r.pick([0, -1.5, 1e39, NaN, Infinity, r.next()]);
    return r.pick([0, -1, 255, 256, -129, 65536, 2 ** 31 - 1, r.int(-300, 300)]);
  });
}

// A ModelInferRequest near what the fuzz server's models take, then bent.
function inferRequest(r: Random): object {
  const model = r.weighted<string>([[6, "mlp"], [4, "upper"], [2, "pipeline"], [1, r.pick(["", "nope", "../mlp", "mlp\u0000", "x".repeat(300)])]]);
  const version = model === "mlp" && r.chance(0.3) ? r.pick(["1", "2", "3", ""]) : "";
  const n = r.skewed(0, 8);
  const good = model === "upper" ? { name: "text", datatype: "BYTES", shape: [n] } : model === "pipeline" ? { name: "n", datatype: "FP32", shape: [1] } : { name: "input", datatype: "FP32", shape: [n, 4] };
  const count = good.shape.reduce((a, b) => a * b, 1);
  const raw = r.chance(0.5);
  const input: Record<string, unknown> = { ...good };
  if (r.chance(0.2)) input.datatype = r.pick(DATATYPES);
  if (r.chance(0.15)) input.shape = Array.from({ length: r.int(0, 4) }, () => r.pick([-1, 0, 1, 4, 2 ** 31, "9223372036854775807", r.int(0, 10)]));
  if (r.chance(0.1)) input.name = r.pick(["", "nope", "input", "text"]);
  const field = r.chance(0.8) ? (good.datatype === "BYTES" ? "bytes_contents" : "fp32_contents") : r.pick(CONTENTS);
  const inputs = [input, ...(r.chance(0.05) ? [{ ...input, name: "extra" }] : [])];
  let rawContents: Uint8Array[] = [];
  if (raw) {
    rawContents = inputs.map(() => (good.datatype === "BYTES" && r.chance(0.7) ? framed(r, count) : r.bytes(r.chance(0.8) ? count * 4 : r.skewed(0, 64))));
    if (r.chance(0.1)) rawContents.push(r.bytes(4));
    if (r.chance(0.1)) input.contents = { [field]: elements(r, field, 1) };
  } else {
    input.contents = { [field]: elements(r, field, r.chance(0.8) ? count : r.skewed(0, 40)) };
  }
  const parameters = r.chance(0.2) ? { [r.pick(["suffix", "binary_data_output", "x"])]: r.pick([{ string_param: "?" }, { bool_param: true }, { int64_param: "-5" }, { double_param: 0.5 }, {}]) } : {};
  const outputs = r.chance(0.2) ? [{ name: r.pick(["output", "upper", "length", "nope", ""]) }, ...(r.chance(0.2) ? [{ name: "output" }] : [])] : [];
  return { model_name: model, model_version: version, id: r.chance(0.3) ? r.string(r.skewed(0, 40), "ab-1é") : "", parameters, inputs, outputs, raw_input_contents: rawContents };
}

// A request of 4 KiB or more: the raw contents stay in its message's buffer, moved to aligned
// offsets, and go to the worker with it. Right for the model or not, of any datatype and length.
function largeRequest(r: Random): object {
  const model = r.pick(["mlp", "upper", "pipeline"]);
  if (model === "upper" && r.chance(0.6)) {
    const count = r.int(1, 40);
    return { model_name: model, inputs: [{ name: "text", datatype: "BYTES", shape: [count] }], raw_input_contents: [framed(r, count, 400)] };
  }
  const n = r.int(1, 4);
  const inputs = Array.from({ length: n }, (_, i) => ({ name: i === 0 ? r.pick(["input", "n", "text"]) : `x${i}`, datatype: r.pick(DATATYPES), shape: [r.int(0, 1500)] }));
  const raw = inputs.map(() => r.bytes(r.chance(0.5) ? r.int(4000, 9000) : r.skewed(0, 64)));
  if (r.chance(0.1)) raw.pop();
  return { model_name: model, inputs, raw_input_contents: raw };
}

function framed(r: Random, count: number, longest = 10): Uint8Array {
  const parts = Array.from({ length: count }, () => {
    const text = Buffer.from(r.string(r.skewed(0, longest), "abc"));
    const head = Buffer.alloc(4);
    head.writeUInt32LE(r.chance(0.9) ? text.length : r.uint32());
    return Buffer.concat([head, text]);
  });
  return Buffer.concat(parts);
}

// A message for any other method: the fields of all of them, near-valid.
function otherRequest(r: Random): object {
  const name = r.pick(["mlp", "upper", "", "nope"]);
  return { name, version: r.pick(["", "1", "9"]), model_name: name, ready: r.chance(0.5), repository_name: r.pick(["", "x"]) };
}

function bend(r: Random, bytes: Buffer): Buffer {
  return r.weighted<() => Buffer>([
    [10, () => bytes],
    [2, () => bytes.subarray(0, r.int(0, bytes.length))],
    [2, () => {
      const out = Buffer.from(bytes);
      for (let i = 0; i < 3 && out.length > 0; i++) out[r.int(0, out.length - 1)] = r.int(0, 255);
      return out;
    }],
    [1, () => Buffer.concat([bytes, Buffer.from(r.bytes(r.skewed(1, 32)))])],
  ])();
}

function metadata(r: Random, token: string): [string, string | Buffer][] {
  const out: [string, string | Buffer][] = [];
  if (r.chance(0.3)) out.push(["authorization", r.pick([`Bearer ${token}`, "Bearer wrong", "", `bearer ${token}`, "Basic x"])]);
  if (r.chance(0.2)) out.push(["x-request-id", r.pick(["abc", "", "a".repeat(300), "é", String(r.uint32())])]);
  if (r.chance(0.1)) out.push([r.pick(["x-odd", "inference-header-content-length", "content-encoding", "x-a-b"]), r.pick(["1", "-5", "gzip", "x".repeat(r.pick([10, 4000]))])]);
  if (r.chance(0.05)) out.push(["x-blob-bin", Buffer.from(r.bytes(r.skewed(0, 64)))]);
  if (r.chance(0.05)) out.push([r.pick(["grpc-accept-encoding", "grpc-encoding", "accept-encoding"]), r.pick(["gzip", "identity", "", " GZIP , deflate", "br", "gzip;q=0", ",,,"])]);
  return out;
}

/** Call `index` of the gRPC run seeded with `seed`. */
export function generateCall(seed: number, index: number, token: string): GrpcFuzzCall {
  const r = Random.of(seed ^ 0x6772, index);
  const serialize = (method: string, message: object) => service[method]!.requestSerialize(message) as Buffer;
  const base = { index, metadata: metadata(r, token), gzip: r.chance(0.15) };
  return r.weighted<() => GrpcFuzzCall>([
    [10, () => ({ ...base, kind: "grpc:infer", method: "ModelInfer", stream: false, messages: [bend(r, serialize("ModelInfer", inferRequest(r)))] })],
    [2, () => ({ ...base, kind: "grpc:large", method: "ModelInfer", stream: false, messages: [bend(r, serialize("ModelInfer", largeRequest(r)))] })],
    [3, () => ({ ...base, kind: "grpc:stream", method: "ModelStreamInfer", stream: true, messages: Array.from({ length: r.skewed(0, 6) }, () => bend(r, serialize("ModelInfer", inferRequest(r)))) })],
    [4, () => {
      const method = r.pick(METHODS.filter((m) => m !== "ModelInfer" && m !== "ModelStreamInfer"));
      return { ...base, kind: "grpc:other", method, stream: false, messages: [bend(r, serialize(method, otherRequest(r)))] };
    }],
    [2, () => ({ ...base, kind: "grpc:bytes", method: r.pick(METHODS), stream: false, messages: [Buffer.from(r.bytes(r.skewed(0, 200)))] })],
    [1, () => ({ ...base, kind: "grpc:unknown", method: r.pick(["Nope", "modelinfer", "", "ModelInfer/x"]), stream: false, messages: [Buffer.alloc(0)] })],
    [0.05, () => ({ ...base, kind: "grpc:huge", method: "ModelInfer", stream: false, messages: [serialize("ModelInfer", { model_name: "mlp", inputs: [{ name: "input", datatype: "FP32", shape: [1, 4] }], raw_input_contents: [Buffer.alloc(11 * 1024 * 1024)] })] })],
  ])();
}

/** Makes the call and resolves with how it ended (or that it did not within `timeoutMs`). */
export function sendCall(clients: { plain: grpc.Client; gzip: grpc.Client }, call: GrpcFuzzCall, timeoutMs: number): Promise<GrpcOutcome> {
  const client = call.gzip ? clients.gzip : clients.plain;
  const md = new grpc.Metadata();
  for (const [key, value] of call.metadata) {
    try {
      md.add(key, value);
    } catch {
      // A value the client library refuses to send is no request at all.
    }
  }
  const path = `/${SERVICE}/${call.method}`;
  const identity = (b: Buffer) => b;
  return new Promise((resolve) => {
    let streamErrors = 0;
    const timer = setTimeout(() => resolve({ call, code: undefined, details: `no status within ${timeoutMs} ms`, streamErrors }), timeoutMs);
    const end = (code: number, details: string) => {
      clearTimeout(timer);
      resolve({ call, code, details, streamErrors });
    };
    if (!call.stream) {
      client.makeUnaryRequest(path, identity, identity, call.messages[0]!, md, (err: grpc.ServiceError | null) => end(err?.code ?? grpc.status.OK, err?.details ?? ""));
      return;
    }
    const stream = client.makeBidiStreamRequest(path, identity, identity, md);
    const decode = service.ModelStreamInfer!.responseDeserialize;
    stream.on("data", (bytes: Buffer) => {
      if ((decode(bytes) as { error_message?: string }).error_message) streamErrors++;
    });
    stream.on("status", (s: grpc.StatusObject) => end(s.code, s.details));
    stream.on("error", () => {});
    for (const message of call.messages) stream.write(message);
    stream.end();
  });
}

/** What is wrong with how a call ended, in words that group alike failures; undefined when nothing is. */
export function judgeCall(o: GrpcOutcome): string | undefined {
  if (o.code === undefined) return `grpc: ${o.details}`;
  if (o.code === grpc.status.INTERNAL && !TRANSPORT_INTERNAL.test(o.details)) return `grpc: INTERNAL ${o.details.slice(0, 80)}`;
  if (o.code !== grpc.status.INTERNAL && !ALLOWED.has(o.code)) return `grpc: status ${grpc.status[o.code]} ${o.details.slice(0, 80)}`;
  return undefined;
}

/** Clients of the fuzz server's gRPC port: one plain, one that gzips its messages. */
export function grpcClients(port: number): { plain: grpc.Client; gzip: grpc.Client; close(): void } {
  const target = `127.0.0.1:${port}`;
  const options = { "grpc.max_send_message_length": -1, "grpc.max_receive_message_length": -1 };
  const plain = new grpc.Client(target, grpc.credentials.createInsecure(), options);
  const gzip = new grpc.Client(target, grpc.credentials.createInsecure(), { ...options, "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip });
  return { plain, gzip, close: () => (plain.close(), gzip.close()) };
}

/** What a gRPC run saw: calls by kind and code, and each kind of failure with calls that show it. */
export interface GrpcFuzzResult {
  count: number;
  codes: Map<string, number>;
  failures: Map<string, GrpcOutcome[]>;
}

/** Makes `count` calls of the run seeded with `seed`, `concurrency` at a time, and judges each. */
export async function runGrpcFuzz(port: number, seed: number, count: number, concurrency: number, token: string, timeoutMs = 15_000): Promise<GrpcFuzzResult> {
  const clients = grpcClients(port);
  const result: GrpcFuzzResult = { count: 0, codes: new Map(), failures: new Map() };
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const outcome = await sendCall(clients, generateCall(seed, next++, token), timeoutMs);
      result.count++;
      const key = `${outcome.call.kind} ${outcome.code === undefined ? "none" : grpc.status[outcome.code]}`;
      result.codes.set(key, (result.codes.get(key) ?? 0) + 1);
      const problem = judgeCall(outcome);
      if (problem !== undefined) result.failures.set(problem, [...(result.failures.get(problem) ?? []), outcome].slice(0, 3));
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    clients.close();
  }
  return result;
}

/** The run as text: counts by kind and code, then each failure with calls that show it. */
export function describeGrpcRun(seed: number, result: GrpcFuzzResult): string[] {
  const lines = [`grpc fuzz: seed ${seed}, ${result.count} calls, ${result.failures.size} kinds of failure`];
  for (const [key, n] of [...result.codes].sort()) lines.push(`  ${key}: ${n}`);
  for (const [problem, examples] of result.failures) {
    lines.push(`FAIL ${problem}`);
    for (const o of examples) lines.push(`  call #${o.call.index} ${o.call.kind} ${o.call.method}${o.call.gzip ? " gzip" : ""}: ${o.details.slice(0, 200)}`);
  }
  return lines;
}
