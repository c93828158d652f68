/**
 * Requests checked against the inputs a model declares in its settings (`inputs` of
 * `model-settings.json`), before its Worker sees them: a module model that declares FP32 never
 * gets FP16 bits, nor a tensor of another rank.
 */
import { ClientError } from "../errors.js";
import { formatShape } from "../tensor/shape.js";
import type { TensorMetadata, V2Tensor } from "./types.js";

function signature(declared: readonly TensorMetadata[]): string {
  return declared.map((d) => `${d.name} (${d.datatype} ${formatShape(d.shape)})`).join(", ") || "none";
}

/**
 * Checks a request's inputs against the model's declared ones: every input is declared, with the
 * same datatype, the same rank and the same size in each fixed dimension (-1 takes any size),
 * and every declared input is given. Throws a {@link ClientError} (400) that names the input.
 */
export function checkDeclaredInputs(inputs: readonly V2Tensor[], declared: readonly TensorMetadata[]): void {
  for (const input of inputs) {
    const spec = declared.find((d) => d.name === input.name);
    if (spec === undefined) throw new ClientError(`the model has no input '${input.name}'; its inputs: ${signature(declared)}`);
    if (input.datatype !== spec.datatype) throw new ClientError(`input '${input.name}' is ${input.datatype}; the model takes ${spec.datatype}`);
    const fits = input.shape.length === spec.shape.length && spec.shape.every((dim, i) => dim === -1 || dim === input.shape[i]);
    if (!fits) throw new ClientError(`input '${input.name}' has shape ${formatShape(input.shape)}; the model takes ${spec.datatype} ${formatShape(spec.shape)}`);
  }
  const missing = declared.find((d) => !inputs.some((input) => input.name === d.name));
  if (missing !== undefined) throw new ClientError(`missing input '${missing.name}' (${missing.datatype} ${formatShape(missing.shape)})`);
}
