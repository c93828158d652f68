/**
 * A module-runtime model for the models benchmark: the sum of its FP32 input `x` (any length).
 * Its work is one pass over the values, so what is measured is moving a large tensor in and
 * out of the server: V2 JSON against the binary tensor extension.
 */
import { ModelWorker, type ModelInput, type ModelOutput } from "shoal";

export default class Sum extends ModelWorker {
  forward({ inputs }: ModelInput): ModelOutput {
    const x = inputs.x!.data as Float32Array;
    let total = 0;
    for (let i = 0; i < x.length; i++) total += x[i]!;
    return { sum: { datatype: "FP32", shape: [1], data: Float32Array.of(total) } };
  }
}
