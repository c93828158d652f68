/**
 * `shoal/client/grpc`: the V2 protocol over gRPC for Node.js and Bun, with `@grpc/grpc-js` and
 * the package's `.proto` files. The HTTP client is `shoal/client`; docs/client.md shows both.
 */
export { GrpcClient, type GrpcCallOptions, type GrpcClientOptions, type GrpcModelOptions } from "./grpc-client.js";
export { GrpcError } from "./grpc-error.js";
export { InferStream, type StreamAnswer } from "./infer-stream.js";
export { ProtocolError } from "../errors.js";
export { outputOf, textOf, type InferInput, type InputTensor } from "../tensors.js";
export type { ModelMetadata, ModelStatistics, RepositoryEntry, ServerMetadata } from "../v2-types.js";
