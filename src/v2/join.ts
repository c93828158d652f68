import type { TypedArray } from "../tensor/datatypes.js";
import type { V2Tensor } from "./types.js";

/**
 * The outputs of a stream of responses as the outputs of one: each output's parts joined along
 * their first dimension, in order (a scalar part counts as one row). Parts of one output must
 * agree on datatype and on every other dimension.
 */
export function joinResponses(responses: readonly V2Tensor[][]): V2Tensor[] {
  const byName = new Map<string, V2Tensor[]>();
  for (const outputs of responses) {
    for (const tensor of outputs) {
      const parts = byName.get(tensor.name);
      if (parts === undefined) byName.set(tensor.name, [tensor]);
      else parts.push(tensor);
    }
  }
  return [...byName].map(([name, parts]) => {
    const first = parts[0]!;
    const inner = first.shape.slice(1).join(",");
    for (const part of parts) {
      if (part.datatype !== first.datatype || part.shape.slice(1).join(",") !== inner) {
        throw new Error(`the streamed parts of output '${name}' differ in datatype or shape (${first.datatype} [${first.shape}] and ${part.datatype} [${part.shape}]): they cannot be joined into one response`);
      }
    }
    const rows = parts.reduce((n, part) => n + (part.shape[0] ?? 1), 0);
    const data = Array.isArray(first.data) ? parts.flatMap((part) => part.data as Uint8Array[]) : joinTyped(parts.map((part) => part.data as TypedArray));
    return { name, datatype: first.datatype, shape: [rows, ...first.shape.slice(1)], data };
  });
}

function joinTyped(arrays: TypedArray[]): TypedArray {
  const length = arrays.reduce((n, a) => n + a.length, 0);
  const joined = new (arrays[0]!.constructor as new (length: number) => TypedArray)(length);
  let at = 0;
  for (const array of arrays) {
    (joined as unknown as { set(a: ArrayLike<unknown>, offset: number): void }).set(array, at);
    at += array.length;
  }
  return joined;
}
