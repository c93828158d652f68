/** Shared by the gRPC tests: a client of the V2 gRPC service made from the package's .proto files, and free ports. */
import { createServer } from "node:net";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ROOT } from "./helpers.js";

/** The package's .proto files, loaded as a client in any language would. */
export const definition = loadSync(["grpc_service.proto"], { includeDirs: [join(ROOT, "proto")], keepCase: true, longs: String, enums: String, defaults: true, arrays: true, objects: true, oneofs: true });

/** A TCP port free now, for a server under test to listen on. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A gRPC error as the client sees it. */
export interface CallError {
  code: number;
  details: string;
  metadata: grpc.Metadata;
}

/** A client of `inference.GRPCInferenceService` on `127.0.0.1:port`; `call(method, request)` makes one unary call. */
export class V2Client {
  readonly client: grpc.Client & Record<string, any>;

  constructor(port: number, options: grpc.ChannelOptions = {}) {
    const Service = grpc.loadPackageDefinition(definition).inference as any;
    this.client = new Service.GRPCInferenceService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), options);
  }

  /** Resolves with the response, or rejects with the call's error. */
  call<T = any>(method: string, request: object, options: { metadata?: Record<string, string>; deadlineMs?: number } = {}): Promise<T> {
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(options.metadata ?? {})) metadata.set(k, v);
    const callOptions: grpc.CallOptions = options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs };
    return new Promise((resolve, reject) => {
      this.client[method](request, metadata, callOptions, (err: CallError | null, response: T) => (err === null ? resolve(response) : reject(err)));
    });
  }

  /** Rejects unless the call fails; resolves with its error. */
  async error(method: string, request: object, options: { metadata?: Record<string, string>; deadlineMs?: number } = {}): Promise<CallError> {
    try {
      await this.call(method, request, options);
    } catch (err) {
      return err as CallError;
    }
    throw new Error(`${method} succeeded where it should fail`);
  }

  close(): void {
    this.client.close();
  }
}

/** An FP32 tensor's raw contents. */
export function fp32(values: number[]): Buffer {
  return Buffer.from(Float32Array.from(values).buffer);
}

/** Raw contents read back as FP32. */
export function readFp32(raw: Buffer): number[] {
  return [...new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))];
}

/** What a raw HTTP/2 gRPC call got: the response headers, each message's compressed flag and its bytes (as sent), and the trailers. */
export interface RawAnswer {
  headers: Record<string, unknown>;
  messages: { compressed: boolean; bytes: Buffer }[];
  trailers: Record<string, unknown>;
}

/**
 * One gRPC call made by hand over node:http2, to see the frames as sent: `message` goes in one
 * frame, gzipped (flag 1, `grpc-encoding: gzip`) with `gzip`; `accept` is the
 * `grpc-accept-encoding` header.
 */
export async function rawCall(port: number, method: string, message: Buffer, options: { gzip?: boolean; accept?: string } = {}): Promise<RawAnswer> {
  const { connect } = await import("node:http2");
  const { gzipSync } = await import("node:zlib");
  const session = connect(`http://127.0.0.1:${port}`);
  try {
    const bytes = options.gzip === true ? gzipSync(message) : message;
    const frame = Buffer.alloc(5 + bytes.byteLength);
    frame.writeUInt8(options.gzip === true ? 1 : 0, 0);
    frame.writeUInt32BE(bytes.byteLength, 1);
    bytes.copy(frame, 5);
    const stream = session.request({
      ":method": "POST",
      ":path": `/inference.GRPCInferenceService/${method}`,
      "content-type": "application/grpc",
      te: "trailers",
      ...(options.gzip === true ? { "grpc-encoding": "gzip" } : {}),
      ...(options.accept === undefined ? {} : { "grpc-accept-encoding": options.accept }),
    });
    const answer: RawAnswer = { headers: {}, messages: [], trailers: {} };
    const chunks: Buffer[] = [];
    stream.on("response", (headers) => (answer.headers = headers));
    stream.on("trailers", (trailers) => (answer.trailers = trailers));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.end(frame);
    await new Promise<void>((resolve, reject) => {
      stream.on("end", resolve);
      stream.on("error", reject);
    });
    let data = Buffer.concat(chunks);
    while (data.byteLength >= 5) {
      const length = data.readUInt32BE(1);
      answer.messages.push({ compressed: data[0] === 1, bytes: data.subarray(5, 5 + length) });
      data = data.subarray(5 + length);
    }
    return answer;
  } finally {
    session.close();
  }
}
