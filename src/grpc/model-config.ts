import type { ModelVersion } from "../models/model-version.js";
import type { TensorMetadata } from "../v2/types.js";
import { RouteModel } from "../serving/route-model.js";

/**
 * A model's configuration as gRPC's ModelConfig answers it, in the shape of Triton's model
 * configuration, from its metadata. `max_batch_size` is 0 and the dims are the model's whole
 * shapes: a Shoal client sends whole tensors, and Shoal batches requests on its own, which
 * `dynamic_batching` says with the longest a request waits for a batch to fill (for a route, its
 * first stage's).
 */
export function modelConfig(target: ModelVersion | RouteModel, metadata: { platform: string; inputs: TensorMetadata[]; outputs: TensorMetadata[] } | undefined): object {
  const tensors = (list: TensorMetadata[] | undefined) => (list ?? []).map((t) => ({ name: t.name, data_type: `TYPE_${t.datatype === "BYTES" ? "STRING" : t.datatype}`, dims: t.shape }));
  const batching = target instanceof RouteModel ? target.route.stages[0]!.options : target.spec;
  const preferred = (target instanceof RouteModel ? target.route.stages[0]!.options.priority : target.spec.settings).preferredBatchSize ?? [batching.maxBatchSize];
  // A wait chosen as it serves ("auto") has no one figure to show.
  const delay = batching.maxWaitMs === "auto" ? {} : { max_queue_delay_microseconds: Math.round(batching.maxWaitMs * 1000) };
  return {
    name: target instanceof RouteModel ? target.name : target.spec.name,
    platform: metadata?.platform ?? "",
    backend: "shoal",
    runtime: target instanceof RouteModel ? "route" : target.spec.runtime === "onnx" || target.spec.runtime === "llama" ? target.spec.runtime : "module",
    max_batch_size: 0,
    input: tensors(metadata?.inputs),
    output: tensors(metadata?.outputs),
    ...(batching.maxBatchSize > 1 ? { dynamic_batching: { preferred_batch_size: preferred, ...delay } } : {}),
  };
}
