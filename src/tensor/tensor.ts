/**
 * Tensors as the ONNX runtime moves them: flat typed arrays in row-major order with a shape.
 * Stacks and splits them along a batch axis.
 */
import { bytesOf } from "./bytes.js";
import { arrayOf, type TensorType, type TypedArray } from "./datatypes.js";
import { elementCount } from "./shape.js";

/** One tensor: its element type, its shape and its elements, flat, in row-major order. */
export interface TensorValue {
  type: TensorType;
  shape: number[];
  data: TypedArray;
}

/** What a model expects of one input, or gives for one output. */
export interface TensorSpec {
  name: string;
  type: TensorType;
  /** Each dimension: a fixed size, or the symbolic name (or -1) of a dynamic one. */
  shape: readonly (number | string)[];
  /** The axis that rows of several requests stack along: the first dynamic dimension, if any. */
  batchAxis: number | undefined;
}

/** Stacks tensors that agree on every dimension but `axis` along it. */
export function concat(parts: readonly TensorValue[], axis: number): TensorValue {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const shape = [...first.shape];
  shape[axis] = parts.reduce((sum, p) => sum + p.shape[axis]!, 0);
  const out = new (arrayOf(first.type))(elementCount(shape));
  const outer = elementCount(shape, 0, axis);
  const inner = elementCount(shape, axis + 1);
  let at = 0;
  for (let o = 0; o < outer; o++) {
    for (const part of parts) {
      const n = part.shape[axis]! * inner;
      out.set(part.data.subarray(o * n, o * n + n) as never, at);
      at += n;
    }
  }
  return { type: first.type, shape, data: out };
}

/**
 * Cuts a tensor along `axis` into parts of `sizes` rows. Each part has a buffer of its own,
 * exactly its size, so that it can move to another thread without a copy.
 */
export function split(tensor: TensorValue, axis: number, sizes: readonly number[]): TensorValue[] {
  const { type, shape, data } = tensor;
  if (sizes.length === 1) return [exclusive(tensor)];
  const outer = elementCount(shape, 0, axis);
  const inner = elementCount(shape, axis + 1);
  const row = shape[axis]! * inner;
  const array = arrayOf(type);
  let offset = 0;
  return sizes.map((rows) => {
    const partShape = [...shape];
    partShape[axis] = rows;
    const n = rows * inner;
    const out = new array(outer * n);
    for (let o = 0; o < outer; o++) out.set(data.subarray(o * row + offset, o * row + offset + n) as never, o * n);
    offset += n;
    return { type, shape: partShape, data: out };
  });
}

function exclusive(tensor: TensorValue): TensorValue {
  const { data } = tensor;
  if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer) return tensor;
  return { ...tensor, data: data.slice() };
}

/** Whether two tensors hold the same shape and elements. */
export function sameTensor(a: TensorValue, b: TensorValue): boolean {
  if (a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) return false;
  return Buffer.compare(bytesOf(a.data), bytesOf(b.data)) === 0;
}
