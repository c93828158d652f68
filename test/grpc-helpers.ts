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
