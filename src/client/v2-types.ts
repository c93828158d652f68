/** What the V2 protocol's calls answer, over REST and gRPC alike, and the options they take. */
import type { TensorMetadata } from "../v2/types.js";
import type { CallOptions } from "./http-transport.js";

/** `GET /v2`, gRPC `ServerMetadata`. */
export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

/** `GET /v2/models/{model}`, gRPC `ModelMetadata`. */
export interface ModelMetadata {
  name: string;
  versions?: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
  parameters?: Record<string, unknown>;
}

/** A model of the repository index (`POST /v2/repository/index`, gRPC `RepositoryIndex`). */
export interface RepositoryEntry {
  name: string;
  version?: string;
  /** `READY`, `UNAVAILABLE`, `LOADING`, ... as the server says it. */
  state?: string;
  reason?: string;
}

/** One model version's statistics, in Triton's statistics extension's shape. */
export interface ModelStatistics {
  name: string;
  version: string;
  last_inference?: number | string;
  inference_count?: number | string;
  execution_count?: number | string;
  inference_stats?: Record<string, { count: number | string; ns: number | string }>;
  [field: string]: unknown;
}

/** A call about a model: which version, if not the server's choice. */
export interface ModelCallOptions extends CallOptions {
  version?: string;
}

/** Options of an inference. */
export interface InferOptions extends ModelCallOptions {
  /**
   * REST only: send the inputs, and ask for the outputs, as binary data (the binary tensor data
   * extension, which Shoal and Triton speak; not every V2 server does). Default false (JSON).
   */
  binary?: boolean | { inputs?: boolean; outputs?: boolean };
}
