/** The V2 (Open Inference Protocol) messages as workers and models see them, once decoded. */
import type { TypedArray, V2Datatype } from "../tensor/datatypes.js";

export type { TypedArray, V2Datatype };

/** The V2 description of one input or output, as model metadata shows it. */
export interface TensorMetadata {
  name: string;
  datatype: V2Datatype;
  /** Each dimension's size; -1 for a dimension of any size. */
  shape: number[];
}

/**
 * A tensor as the model sees it: row-major data, typed array for numeric types
 * (BigInt64Array/BigUint64Array for 64-bit ints, Uint16Array holding raw half floats for FP16,
 * Uint8Array of 0/1 for BOOL), an array of Uint8Array for BYTES.
 *
 * Decoded tensors never carry `parameters.binary_data_size`: how a tensor travelled is the codec's
 * business, so a tensor reads the same whether it came as JSON or as binary data.
 */
export interface V2Tensor {
  name: string;
  datatype: V2Datatype;
  shape: number[];
  data: TypedArray | Uint8Array[];
  parameters?: Record<string, unknown>;
}

/** An output the client asks for, by name, with its own parameters (`binary_data`, ...). */
export interface V2RequestedOutput {
  name: string;
  parameters?: Record<string, unknown>;
}

/** An inference request: `POST /v2/models/{model}[/versions/{version}]/infer`. */
export interface V2InferenceRequest {
  id?: string;
  parameters?: Record<string, unknown>;
  inputs: V2Tensor[];
  /** The outputs to send back, in this order; all of the model's when absent or empty. */
  outputs?: V2RequestedOutput[];
}

/** An inference response. */
export interface V2InferenceResponse {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, unknown>;
  outputs: V2Tensor[];
}

/**
 * A request body in pieces, not joined: its JSON header's bytes, then the binary data of each
 * tensor with `binary_data_size`, one piece per tensor in header order, each exactly that size.
 * The gRPC front hands a request's raw contents to a worker so, as views of its message.
 */
export interface V2Pieces {
  header: Uint8Array;
  parts: readonly Uint8Array[];
}

/** An encoded request or response, ready to send over HTTP. */
export interface V2Body {
  body: Uint8Array;
  /** The JSON header's length in bytes, for `Inference-Header-Content-Length`: only when binary data follows it. */
  headerLength?: number;
  /** `application/octet-stream` when binary data follows the JSON header (as Triton sends), else `application/json`. */
  contentType: string;
}
