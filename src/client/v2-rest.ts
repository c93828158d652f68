/**
 * The V2 (Open Inference) protocol over REST, as any V2 server speaks it (Shoal, Triton,
 * MLServer, KServe): health, metadata, inference with JSON or binary tensors, the repository and
 * statistics extensions, and the generate extension with its stream.
 */
import { ShoalError } from "../errors.js";
import { HEADER_LENGTH } from "../v2/binary.js";
import { encodeInferenceRequest } from "../v2/request.js";
import { decodeInferenceResponse } from "../v2/response.js";
import type { V2InferenceResponse } from "../v2/types.js";
import { HttpError, ProtocolError } from "./errors.js";
import { jsonBody, type CallOptions, type HttpTransport } from "./http-transport.js";
import { jsonChunks } from "./streams.js";
import { toRequest, type InferInput } from "./tensors.js";
import type { InferOptions, ModelCallOptions, ModelMetadata, ModelStatistics, RepositoryEntry, ServerMetadata } from "./v2-types.js";

const utf8 = new TextEncoder();

/** The V2 REST calls of a client (`client.v2`). */
export class V2Rest {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  /** `GET /v2/health/live`: whether the server answers 200. */
  live(options?: CallOptions): Promise<boolean> {
    return this.#health("/v2/health/live", options);
  }

  /** `GET /v2/health/ready`: whether the server is ready for inference. */
  ready(options?: CallOptions): Promise<boolean> {
    return this.#health("/v2/health/ready", options);
  }

  /** `GET /v2/models/{model}/ready`: whether that model (version) is ready. */
  modelReady(model: string, options: ModelCallOptions = {}): Promise<boolean> {
    return this.#health(`${modelPath(model, options.version)}/ready`, options);
  }

  /** `GET /v2`: the server's name, version and extensions. */
  serverMetadata(options?: CallOptions): Promise<ServerMetadata> {
    return this.#http.json({ method: "GET", path: "/v2" }, options);
  }

  /** `GET /v2/models/{model}`: its versions, platform, inputs and outputs. */
  modelMetadata(model: string, options: ModelCallOptions = {}): Promise<ModelMetadata> {
    return this.#http.json({ method: "GET", path: modelPath(model, options.version) }, options);
  }

  /** `GET /v2/models/{model}/config`: the model's configuration, as the server describes it (Triton's model configuration extension). */
  modelConfig(model: string, options: ModelCallOptions = {}): Promise<Record<string, unknown>> {
    return this.#http.json({ method: "GET", path: `${modelPath(model, options.version)}/config` }, options);
  }

  /**
   * `POST /v2/models/{model}/infer`. Tensors go as JSON, or as binary data with `binary`
   * (typed arrays sent as their bytes, and outputs read as views of the answer's where they
   * are aligned). Rejects with an {@link HttpError} carrying the server's message.
   */
  async infer(model: string, input: InferInput, options: InferOptions = {}): Promise<V2InferenceResponse> {
    const binary = typeof options.binary === "object" ? options.binary : { inputs: options.binary, outputs: options.binary };
    const request = toRequest(input);
    if (binary.outputs === true) request.parameters = { ...request.parameters, binary_data_output: true };
    const { body, headerLength, contentType } = encoded(() => encodeInferenceRequest(request, { binaryInputs: binary.inputs === true }));
    const headers: Record<string, string> = { "content-type": contentType };
    if (headerLength !== undefined) headers[HEADER_LENGTH] = String(headerLength);
    const response = await this.#http.send({ method: "POST", path: `${modelPath(model, options.version)}/infer`, body, headers }, options);
    return decoded(new Uint8Array(await response.arrayBuffer()), response.headers.get(HEADER_LENGTH) ?? undefined);
  }

  /**
   * `POST /v2/models/{model}/infer_stream` (Shoal's): the V2 responses of a model that streams,
   * one per event, as they come.
   */
  async *inferStream(model: string, input: InferInput, options: ModelCallOptions = {}): AsyncGenerator<V2InferenceResponse> {
    const { body } = encoded(() => encodeInferenceRequest(toRequest(input)));
    const response = await this.#http.send({ method: "POST", path: `${modelPath(model, options.version)}/infer_stream`, body, headers: { "content-type": "application/json", accept: "text/event-stream" } }, options);
    for await (const chunk of jsonChunks<unknown>(response)) yield decoded(utf8.encode(JSON.stringify(chunk)), undefined);
  }

  /** `POST /v2/models/{model}/generate` (the generate extension): its fields in, its fields out. */
  generate<T = Record<string, unknown>>(model: string, body: Record<string, unknown>, options: ModelCallOptions = {}): Promise<T> {
    return this.#http.json({ method: "POST", path: `${modelPath(model, options.version)}/generate`, ...jsonBody(body) }, options);
  }

  /** `POST /v2/models/{model}/generate_stream`: each event's fields as they come. */
  async *generateStream<T = Record<string, unknown>>(model: string, body: Record<string, unknown>, options: ModelCallOptions = {}): AsyncGenerator<T> {
    const response = await this.#http.send({ method: "POST", path: `${modelPath(model, options.version)}/generate_stream`, body: JSON.stringify(body), headers: { "content-type": "application/json", accept: "text/event-stream" } }, options);
    yield* jsonChunks<T>(response);
  }

  /** `POST /v2/repository/index`: the repository's models, or only the ready ones. */
  repositoryIndex(options: CallOptions & { ready?: boolean } = {}): Promise<RepositoryEntry[]> {
    return this.#http.json({ method: "POST", path: "/v2/repository/index", ...jsonBody(options.ready === undefined ? {} : { ready: options.ready }) }, options);
  }

  /** `POST /v2/repository/models/{model}/load`, with the admin token. Resolves once the server has loaded it. */
  async load(model: string, options: CallOptions & { parameters?: Record<string, unknown> } = {}): Promise<void> {
    await this.#control(model, "load", options);
  }

  /** `POST /v2/repository/models/{model}/unload`, with the admin token. */
  async unload(model: string, options: CallOptions = {}): Promise<void> {
    await this.#control(model, "unload", options);
  }

  /** `GET /v2/models/{model}/stats`, or every model's (`/v2/models/stats`) without a model: Triton's statistics extension. */
  async statistics(model?: string, options: ModelCallOptions = {}): Promise<ModelStatistics[]> {
    const path = model === undefined ? "/v2/models/stats" : `${modelPath(model, options.version)}/stats`;
    return (await this.#http.json<{ model_stats: ModelStatistics[] }>({ method: "GET", path }, options)).model_stats;
  }

  async #control(model: string, action: "load" | "unload", options: CallOptions & { parameters?: Record<string, unknown> }): Promise<void> {
    const body = jsonBody(options.parameters === undefined ? {} : { parameters: options.parameters });
    const response = await this.#http.send({ method: "POST", path: `/v2/repository/models/${encodeURIComponent(model)}/${action}`, ...body, admin: true }, options);
    await response.body?.cancel();
  }

  // A health call's answer: 200 is yes, any other status no; a network failure rejects.
  async #health(path: string, options: CallOptions | undefined): Promise<boolean> {
    try {
      const response = await this.#http.send({ method: "GET", path }, { retry: false, ...options });
      await response.body?.cancel();
      return true;
    } catch (err) {
      if (err instanceof HttpError) return false;
      throw err;
    }
  }
}

/** `/v2/models/{model}[/versions/{version}]`, each segment escaped. */
function modelPath(model: string, version: string | undefined): string {
  return `/v2/models/${encodeURIComponent(model)}${version === undefined ? "" : `/versions/${encodeURIComponent(version)}`}`;
}

// The codec's own errors (data that does not fit its shape or datatype) are the caller's: a TypeError.
function encoded<T>(encode: () => T): T {
  try {
    return encode();
  } catch (err) {
    if (err instanceof ShoalError) throw new TypeError(err.message);
    throw err;
  }
}

function decoded(body: Uint8Array, headerLength: string | undefined): V2InferenceResponse {
  try {
    return decodeInferenceResponse(body, headerLength);
  } catch (err) {
    if (err instanceof ShoalError) throw new ProtocolError(err.message);
    throw err;
  }
}
