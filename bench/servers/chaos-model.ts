/**
 * The chaos run's model (a module runtime on the shared pool): `y = 2x` for an FP32 `x`, in
 * batches, each after 10 ms of waiting. A request whose parameters say `"exit": true` ends the worker running it from inside,
 * as the chaos run kills threads.
 */
import { ModelWorker, type ModelInput, type ModelOutput } from "shoal";

export default class Double extends ModelWorker {
  static override batched = true;

  async forward(requests: ModelInput[]): Promise<ModelOutput[]> {
    if (requests.some((r) => r.parameters.exit === true)) process.exit(1);
    // A model's run takes a while: kills catch batches in flight.
    await new Promise((resolve) => setTimeout(resolve, 10));
    return requests.map(({ inputs }) => {
      const x = inputs.x!;
      return { y: { datatype: "FP32", shape: x.shape, data: Float32Array.from(x.data as Float32Array, (v) => 2 * v) } };
    });
  }
}
