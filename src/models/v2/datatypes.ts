/**
 * The 13 V2 datatypes: the typed array that holds each in a {@link V2Tensor}, its element size in
 * binary data, and its name in onnxruntime-node.
 */
import type { TypedArray } from "../../runtimes/tensor.js";
import type { V2Datatype } from "./types.js";

/** Every datatype but BYTES: those with a fixed element size, held in a typed array. */
export type NumericDatatype = Exclude<V2Datatype, "BYTES">;

// BOOL is one byte per element, 0 or 1, as in binary data and in onnxruntime-node. FP16 keeps the
// raw IEEE half bits: Node.js 20 has no Float16Array, and onnxruntime-node takes a Uint16Array.
const NUMERIC = {
  BOOL: { array: Uint8Array, onnx: "bool" },
  UINT8: { array: Uint8Array, onnx: "uint8" },
  UINT16: { array: Uint16Array, onnx: "uint16" },
  UINT32: { array: Uint32Array, onnx: "uint32" },
  UINT64: { array: BigUint64Array, onnx: "uint64" },
  INT8: { array: Int8Array, onnx: "int8" },
  INT16: { array: Int16Array, onnx: "int16" },
  INT32: { array: Int32Array, onnx: "int32" },
  INT64: { array: BigInt64Array, onnx: "int64" },
  FP16: { array: Uint16Array, onnx: "float16" },
  FP32: { array: Float32Array, onnx: "float32" },
  FP64: { array: Float64Array, onnx: "float64" },
} as const;

/** The class of the typed array that holds a numeric datatype. */
export type TypedArrayClass = (typeof NUMERIC)[NumericDatatype]["array"];

/** The element type names of onnxruntime-node that have a V2 datatype. */
export type OnnxType = (typeof NUMERIC)[NumericDatatype]["onnx"] | "string";

/** The 13 datatypes, in the order the specification lists them. */
export const V2_DATATYPES: readonly V2Datatype[] = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"];

/** True when `value` is one of the 13 datatype names (they are case-sensitive). */
export function isV2Datatype(value: unknown): value is V2Datatype {
  return typeof value === "string" && (value === "BYTES" || Object.hasOwn(NUMERIC, value));
}

/** True for every datatype but BYTES. */
export function isNumeric(datatype: V2Datatype): datatype is NumericDatatype {
  return datatype !== "BYTES";
}

/**
 * The typed array class that holds `datatype`'s elements in a {@link V2Tensor}: `Uint8Array` for
 * BOOL (0 or 1), `Uint16Array` of raw half floats for FP16, `BigInt64Array`/`BigUint64Array` for
 * the 64-bit integers. BYTES has none (its data is an array of `Uint8Array`).
 */
export function typedArrayFor<D extends NumericDatatype>(datatype: D): (typeof NUMERIC)[D]["array"];
export function typedArrayFor(datatype: V2Datatype): TypedArrayClass | undefined;
export function typedArrayFor(datatype: V2Datatype): TypedArrayClass | undefined {
  return isNumeric(datatype) ? NUMERIC[datatype].array : undefined;
}

/** Bytes per element in binary data; undefined for BYTES, whose elements vary in length. */
export function elementSize(datatype: V2Datatype): number | undefined {
  return typedArrayFor(datatype)?.BYTES_PER_ELEMENT;
}

/**
 * The V2 datatype of an onnxruntime-node element type (`"float32"` → FP32, `"string"` → BYTES);
 * undefined for types V2 has no datatype for (`"int4"`, `"uint4"`, `"bfloat16"`, ...).
 */
export function fromOnnxType(type: string): V2Datatype | undefined {
  if (type === "string") return "BYTES";
  for (const datatype of V2_DATATYPES) {
    if (isNumeric(datatype) && NUMERIC[datatype].onnx === type) return datatype;
  }
  return undefined;
}

/**
 * The onnxruntime-node element type of a V2 datatype. Every datatype has one; BYTES maps to
 * `"string"`, whose tensors hold JavaScript strings, so its elements need decoding from UTF-8.
 */
export function toOnnxType(datatype: V2Datatype): OnnxType {
  return isNumeric(datatype) ? NUMERIC[datatype].onnx : "string";
}

/** The number of elements of a shape: the product of its dimensions (1 for a scalar). */
export function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (const dim of shape) count *= dim;
  return count;
}

/** Whether `data` is the kind of array that holds `datatype` in a {@link V2Tensor}. */
export function holds(datatype: V2Datatype, data: unknown): data is TypedArray | Uint8Array[] {
  if (isNumeric(datatype)) return data instanceof NUMERIC[datatype].array;
  return Array.isArray(data) && data.every((element) => element instanceof Uint8Array);
}
