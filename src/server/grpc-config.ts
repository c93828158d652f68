import type { ModelVersion } from "../models/model-version.js";
import type { TensorMetadata } from "../v2/types.js";

/**
 * A model version's configuration as gRPC's ModelConfig answers it, in the shape of Triton's
 * model configuration. `max_batch_size` is 0 and the dims are the model's whole shapes: a Shoal
 * client sends whole tensors, and Shoal batches requests on its own, which `dynamic_batching`
 * says with the longest a request waits for a batch to fill.
 */
export function modelConfig(model: ModelVersion): object {
  const { spec, metadata } = model;
  const tensors = (list: TensorMetadata[] | undefined) => (list ?? []).map((t) => ({ name: t.name, data_type: `TYPE_${t.datatype === "BYTES" ? "STRING" : t.datatype}`, dims: t.shape }));
  return {
    name: spec.name,
    platform: metadata?.platform ?? "",
    backend: "shoal",
    runtime: spec.runtime === "onnx" ? "onnx" : "module",
    max_batch_size: 0,
    input: tensors(metadata?.inputs),
    output: tensors(metadata?.outputs),
    ...(spec.maxBatchSize > 1 ? { dynamic_batching: { preferred_batch_size: [spec.maxBatchSize], max_queue_delay_microseconds: spec.maxWaitMs * 1000 } } : {}),
  };
}
