/**
 * The V2 (Open Inference Protocol) REST codecs, with Triton's binary tensor data extension: pure
 * functions from bytes to tensors and back, run in workers. No I/O here.
 */
export type { TensorMetadata, TypedArray, V2Body, V2Datatype, V2InferenceRequest, V2InferenceResponse, V2Pieces, V2RequestedOutput, V2Tensor } from "./types.js";
export { elementSize, fromOnnxType, isV2Datatype, toOnnxType, typedArrayFor, V2_DATATYPES, type NumericDatatype, type OnnxType, type TypedArrayClass } from "../tensor/datatypes.js";
export { halfToNumber, numberToHalf } from "../tensor/fp16.js";
export { elementCount } from "../tensor/shape.js";
export { HEADER_LENGTH } from "./binary.js";
export { decodeInferenceRequest, decodeParsedRequest, encodeInferenceRequest, type EncodeRequestOptions } from "./request.js";
export { decodeInferenceResponse, encodeInferenceResponse } from "./response.js";
