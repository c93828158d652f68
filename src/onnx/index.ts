/**
 * `shoal/onnx`: a ready Worker that serves an ONNX model with onnxruntime-node, batching the
 * rows of concurrent requests into one run, and the tensor helpers it is built on, for Workers
 * that build on it.
 * @packageDocumentation
 */
export { OnnxWorker, onnxWorker, defaultIntraOpThreads, type CheckedRequest, type OnnxSessionOptions, type OnnxWorkerOptions, type Tensors } from "./onnx-worker.js";
export { concat, split, type TensorSpec, type TensorValue } from "../tensor/tensor.js";
export { readTensor } from "../tensor/read-tensor.js";
export { toNested } from "../tensor/write.js";
export { formatShape } from "../tensor/shape.js";
export type { TensorType, TypedArray } from "../tensor/datatypes.js";
export { ElementBudget } from "../tensor/element-budget.js";
export type { RequestLimits } from "../limits.js";
