/**
 * `shoal/client`: a typed client of Shoal and of any V2 (Open Inference Protocol) server, over
 * HTTP with `fetch` only, for Node.js, Bun and browsers. Its gRPC side is `shoal/client/grpc`
 * (Node.js and Bun). docs/client.md shows it in use.
 */
export { Client, type RouteOptions, type StreamOptions } from "./client.js";
export { HttpError, ProtocolError, StreamError } from "./errors.js";
export type { CallOptions, ClientOptions } from "./http-transport.js";
export { packTensor, unpackTensor, type PackedTensor } from "./msgpack.js";
export type { ChatCompletion, ChatCompletionChunk, ChatMessage, ChatRequest, Completion, CompletionRequest, OpenAIRoutes, Usage } from "./openai.js";
export type { RetryOptions } from "./retry.js";
export { serverSentEvents, type ServerSentEvent } from "./streams.js";
export { outputOf, textOf, type InferInput, type InputTensor, type TensorData } from "./tensors.js";
export type { V2Rest } from "./v2-rest.js";
export type { InferOptions, ModelCallOptions, ModelMetadata, ModelStatistics, RepositoryEntry, ServerMetadata } from "./v2-types.js";
export type { TensorMetadata, TypedArray, V2Datatype, V2InferenceResponse, V2Tensor } from "../v2/types.js";
