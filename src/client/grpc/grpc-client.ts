/**
 * The V2 protocol over gRPC (`inference.GRPCInferenceService`), on Node.js and Bun: health,
 * metadata, ModelInfer and ModelStreamInfer, the repository and statistics, with the messages of
 * the `.proto` files the package ships. It speaks to any V2 gRPC server (Shoal, Triton, MLServer).
 */
import * as grpc from "@grpc/grpc-js";
import type { InferResponseMessage } from "../../grpc/messages.js";
import { loadProtos } from "../../grpc/protos.js";
import type { TensorMetadata, V2InferenceResponse } from "../../v2/types.js";
import { retryDelay, retryPolicy, type RetryOptions } from "../retry.js";
import { sleep } from "../sleep.js";
import { toRequest, type InferInput } from "../tensors.js";
import type { ModelMetadata, ModelStatistics, RepositoryEntry, ServerMetadata } from "../v2-types.js";
import { GrpcError, RETRY_STATUS } from "./grpc-error.js";
import { inferRequestMessage, inferResponse } from "./infer-messages.js";
import { InferStream } from "./infer-stream.js";

/** Options of a gRPC client, for all its calls. */
export interface GrpcClientOptions {
  /** The admin token, sent as `authorization: Bearer <token>` metadata with load and unload only. */
  adminToken?: string;
  /** Metadata sent with every call. */
  metadata?: Record<string, string>;
  /** Each call's deadline in ms, retries included (a stream's: its whole life); none by default. */
  timeoutMs?: number;
  /** Retries of unary calls refused RESOURCE_EXHAUSTED or UNAVAILABLE. Off by default. */
  retry?: RetryOptions | boolean;
  /** Messages sent gzipped. None by default. */
  compression?: "gzip";
  /** TLS or other credentials; plaintext (h2c) by default. */
  credentials?: grpc.ChannelCredentials;
  /** grpc-js channel options (`grpc.max_receive_message_length`, ...). */
  channelOptions?: grpc.ChannelOptions;
}

/** Options of one gRPC call. */
export interface GrpcCallOptions {
  /** Cancels the call: it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** This call's deadline in ms, over the client's. */
  timeoutMs?: number;
  /** Metadata of this call, over the client's. */
  metadata?: Record<string, string>;
  /** This call's retries, over the client's. */
  retry?: RetryOptions | boolean;
}

/** A call about a model version ("" or absent: the server's choice). */
export interface GrpcModelOptions extends GrpcCallOptions {
  version?: string;
}

// The shapes of metadata come as decimal strings (64-bit integers): numbers here.
interface TensorMetadataMessage {
  name: string;
  datatype: string;
  shape: string[];
}

/** A client of one server's V2 gRPC service, by its address (`127.0.0.1:8001`). Call `close()` when done. */
export class GrpcClient {
  readonly #client: grpc.Client & Record<string, any>;
  readonly #options: GrpcClientOptions;

  constructor(address: string, options: GrpcClientOptions = {}) {
    this.#options = options;
    const Service = (grpc.loadPackageDefinition(loadProtos()).inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
    const channel: grpc.ChannelOptions = { ...options.channelOptions };
    // grpc-js numbers the algorithms: 2 is gzip.
    if (options.compression === "gzip") channel["grpc.default_compression_algorithm"] = 2;
    this.#client = new Service(address, options.credentials ?? grpc.credentials.createInsecure(), channel) as grpc.Client & Record<string, any>;
  }

  /** `ServerLive`. */
  async live(options?: GrpcCallOptions): Promise<boolean> {
    return (await this.#unary<{ live: boolean }>("ServerLive", {}, options)).live;
  }

  /** `ServerReady`. */
  async ready(options?: GrpcCallOptions): Promise<boolean> {
    return (await this.#unary<{ ready: boolean }>("ServerReady", {}, options)).ready;
  }

  /** `ModelReady`. */
  async modelReady(model: string, options: GrpcModelOptions = {}): Promise<boolean> {
    return (await this.#unary<{ ready: boolean }>("ModelReady", { name: model, version: options.version ?? "" }, options)).ready;
  }

  /** `ServerMetadata`. */
  serverMetadata(options?: GrpcCallOptions): Promise<ServerMetadata> {
    return this.#unary("ServerMetadata", {}, options);
  }

  /** `ModelMetadata`, its shapes as numbers. */
  async modelMetadata(model: string, options: GrpcModelOptions = {}): Promise<ModelMetadata> {
    const answer = await this.#unary<Omit<ModelMetadata, "inputs" | "outputs"> & { inputs: TensorMetadataMessage[]; outputs: TensorMetadataMessage[] }>("ModelMetadata", { name: model, version: options.version ?? "" }, options);
    const tensors = (list: TensorMetadataMessage[]) => list.map((t) => ({ ...t, shape: t.shape.map(Number) }) as TensorMetadata);
    return { ...answer, inputs: tensors(answer.inputs), outputs: tensors(answer.outputs) };
  }

  /** `ModelConfig`: the model's configuration as the server describes it. */
  async modelConfig(model: string, options: GrpcModelOptions = {}): Promise<Record<string, unknown>> {
    return (await this.#unary<{ config: Record<string, unknown> }>("ModelConfig", { name: model, version: options.version ?? "" }, options)).config;
  }

  /** `ModelInfer`: inputs sent as raw contents, outputs read from raw or typed contents. */
  async infer(model: string, input: InferInput, options: GrpcModelOptions = {}): Promise<V2InferenceResponse> {
    const message = inferRequestMessage(model, options.version ?? "", toRequest(input));
    return inferResponse(await this.#unary<InferResponseMessage>("ModelInfer", message, options));
  }

  /**
   * `ModelStreamInfer`: a bidirectional stream. `send()` requests on it, iterate over the answers
   * (each as it finishes, matched by `id`), and `end()` it once every request is sent.
   */
  stream(options: GrpcCallOptions = {}): InferStream {
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs;
    const call = this.#client.ModelStreamInfer(this.#metadata(options, false), timeoutMs === undefined ? {} : { deadline: Date.now() + timeoutMs }) as grpc.ClientDuplexStream<unknown, { error_message: string; infer_response: InferResponseMessage | null }>;
    return new InferStream(call, options.signal);
  }

  /** `ModelStatistics` of a model, or of every model without one; counts as the server sends them (64-bit: decimal strings). */
  async statistics(model?: string, options: GrpcModelOptions = {}): Promise<ModelStatistics[]> {
    return (await this.#unary<{ model_stats: ModelStatistics[] }>("ModelStatistics", { name: model ?? "", version: options.version ?? "" }, options)).model_stats;
  }

  /** `RepositoryIndex`. */
  async repositoryIndex(options: GrpcCallOptions & { ready?: boolean } = {}): Promise<RepositoryEntry[]> {
    return (await this.#unary<{ models: RepositoryEntry[] }>("RepositoryIndex", { repository_name: "", ready: options.ready ?? false }, options)).models;
  }

  /** `RepositoryModelLoad`, with the admin token. */
  async load(model: string, options?: GrpcCallOptions): Promise<void> {
    await this.#unary("RepositoryModelLoad", { repository_name: "", model_name: model }, options, true);
  }

  /** `RepositoryModelUnload`, with the admin token. */
  async unload(model: string, options?: GrpcCallOptions): Promise<void> {
    await this.#unary("RepositoryModelUnload", { repository_name: "", model_name: model }, options, true);
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close();
  }

  #metadata(options: GrpcCallOptions, admin: boolean): grpc.Metadata {
    const metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries({ ...this.#options.metadata, ...options.metadata })) metadata.set(key, value);
    if (admin && this.#options.adminToken !== undefined) metadata.set("authorization", `Bearer ${this.#options.adminToken}`);
    return metadata;
  }

  async #unary<T>(method: string, request: object, options: GrpcCallOptions = {}, admin = false): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs;
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const policy = retryPolicy(options.retry ?? this.#options.retry);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once<T>(method, request, this.#metadata(options, admin), deadline, options.signal);
      } catch (err) {
        const status = err instanceof GrpcError ? RETRY_STATUS.get(err.code) : undefined;
        const delay = status === undefined ? undefined : retryDelay(policy, { attempt, status, now: Date.now(), deadline });
        if (delay === undefined) throw err;
        await sleep(delay, options.signal);
      }
    }
  }

  #once<T>(method: string, request: object, metadata: grpc.Metadata, deadline: number | undefined, signal: AbortSignal | undefined): Promise<T> {
    signal?.throwIfAborted();
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => call.cancel();
      const call: grpc.ClientUnaryCall = this.#client[method](request, metadata, deadline === undefined ? {} : { deadline }, (err: grpc.ServiceError | null, response: T) => {
        signal?.removeEventListener("abort", onAbort);
        if (err === null) resolve(response);
        else reject(signal?.aborted === true ? signal.reason : new GrpcError(err));
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
