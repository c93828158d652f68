/**
 * Shoal: serve a TypeScript `Worker` over HTTP with dynamic batching, pipelined stages and
 * parallel workers.
 * @packageDocumentation
 */
export { Server, type ServerOptions } from "./app/server.js";
export type { RouteModelOptions } from "./serving/route-model.js";
export { Worker, type WorkerClass, type RequestMeta, type StreamSettings, type V2Identity } from "./worker.js";
export { StepWorker, type StepResult } from "./step-worker.js";
export { fanOut, type FanOut } from "./fan-out.js";
export { TextRequest, TextChunk, ChatMessage, TokenLogprob } from "./text-generation.js";
export { incremental, StopStrings, type Detokenizer } from "./text-stream.js";
export { EmbeddingRequest, embeddingInputs, embeddingResponse, MAX_EMBEDDING_INPUTS, type EmbeddingResponse } from "./embeddings.js";
export { ModelWorker, type ModelInput, type ModelOutput, type ModelResult, type ModelTensor } from "./model-worker.js";
export { SettingsError, type ModelSettingsInput as ModelSettings } from "./models/settings.js";
export { python, type PythonOptions } from "./python.js";
export { typed, typedBatch, type ItemWorker, type BatchWorker, type WorkerSchemas } from "./typed-worker.js";
export type { Schema } from "./schema.js";
export type { StageOptions, Isolation, PrioritySettings, QueuePolicySettings } from "./stage-options.js";
export type { ServerConfig } from "./config.js";
export { codecs, json, msgpack, bytes, type Codec } from "./codecs.js";
export {
  ShoalError,
  ClientError,
  DecodingError,
  ValidationError,
  ServerError,
  EncodingError,
  ERRORS,
  type ErrorCode,
} from "./errors.js";
