/**
 * Every element type a tensor may hold, in one table: its V2 (Open Inference Protocol) name, its
 * name in onnxruntime-node, the typed array that holds it, and the values it takes.
 */

/** The 13 datatypes, by their V2 names, in the order the specification lists them. */
export const V2_DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"] as const;

/** The 13 element types of the V2 protocol. */
export type V2Datatype = (typeof V2_DATATYPES)[number];

/** Every datatype but BYTES: those with a fixed element size, held in a typed array. */
export type NumericDatatype = Exclude<V2Datatype, "BYTES">;

/**
 * The smallest magnitude that rounds to infinity as a float32: halfway from its largest value,
 * 2^128 - 2^104, to 2^128 (the tie goes to the even neighbour, infinity).
 */
export const FLOAT32_OVERFLOW = 2 ** 128 - 2 ** 103;

/**
 * The values a numeric datatype takes: integers within [min, max] (bigints for the 64-bit ones),
 * floats of a magnitude below `overflow` (the smallest that rounds to infinity; NaN and the
 * infinities aside), booleans as 0 or 1.
 */
export type DatatypeValues =
  | { kind: "bool" }
  | { kind: "int"; min: number; max: number }
  | { kind: "bigint"; min: bigint; max: bigint }
  | { kind: "float"; overflow: number };

const int = (bits: 8 | 16 | 32, signed: boolean): DatatypeValues =>
  signed ? { kind: "int", min: -(2 ** (bits - 1)), max: 2 ** (bits - 1) - 1 } : { kind: "int", min: 0, max: 2 ** bits - 1 };
const bigint = (signed: boolean): DatatypeValues => (signed ? { kind: "bigint", min: -(2n ** 63n), max: 2n ** 63n - 1n } : { kind: "bigint", min: 0n, max: 2n ** 64n - 1n });

// BOOL is one byte per element, 0 or 1, as in binary data and in onnxruntime-node. FP16 keeps the
// raw IEEE half bits: Node.js 20 has no Float16Array, and onnxruntime-node takes a Uint16Array.
// A half float's largest value is 65504; 65520 lies halfway to the next power of two.
const NUMERIC = {
  BOOL: { array: Uint8Array, onnx: "bool", values: { kind: "bool" } },
  UINT8: { array: Uint8Array, onnx: "uint8", values: int(8, false) },
  UINT16: { array: Uint16Array, onnx: "uint16", values: int(16, false) },
  UINT32: { array: Uint32Array, onnx: "uint32", values: int(32, false) },
  UINT64: { array: BigUint64Array, onnx: "uint64", values: bigint(false) },
  INT8: { array: Int8Array, onnx: "int8", values: int(8, true) },
  INT16: { array: Int16Array, onnx: "int16", values: int(16, true) },
  INT32: { array: Int32Array, onnx: "int32", values: int(32, true) },
  INT64: { array: BigInt64Array, onnx: "int64", values: bigint(true) },
  FP16: { array: Uint16Array, onnx: "float16", values: { kind: "float", overflow: 65520 } },
  FP32: { array: Float32Array, onnx: "float32", values: { kind: "float", overflow: FLOAT32_OVERFLOW } },
  FP64: { array: Float64Array, onnx: "float64", values: { kind: "float", overflow: Infinity } },
} as const satisfies Record<NumericDatatype, { array: unknown; onnx: string; values: DatatypeValues }>;

/** The class of the typed array that holds a numeric datatype. */
export type TypedArrayClass = (typeof NUMERIC)[NumericDatatype]["array"];

/** A typed array that holds the elements of a numeric datatype. */
export type TypedArray = InstanceType<TypedArrayClass>;

/** The element type names of onnxruntime-node that have a V2 datatype. */
export type OnnxType = (typeof NUMERIC)[NumericDatatype]["onnx"] | "string";

/**
 * The element types `shoal/onnx` serves, by ONNX Runtime's names (which are also numpy's): the
 * numeric ones but float16.
 */
export type TensorType = Exclude<(typeof NUMERIC)[NumericDatatype]["onnx"], "float16">;

/** The {@link TensorType}s. */
export const TENSOR_TYPES: readonly TensorType[] = V2_DATATYPES.flatMap((datatype) => (isNumeric(datatype) && datatype !== "FP16" ? [NUMERIC[datatype].onnx] : []));

/** True when `value` is one of the 13 datatype names (they are case-sensitive). */
export function isV2Datatype(value: unknown): value is V2Datatype {
  return typeof value === "string" && (value === "BYTES" || Object.hasOwn(NUMERIC, value));
}

/** True for every datatype but BYTES. */
export function isNumeric(datatype: V2Datatype): datatype is NumericDatatype {
  return datatype !== "BYTES";
}

/**
 * The typed array class that holds `datatype`'s elements in a V2 tensor: `Uint8Array` for
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

/** The values a numeric datatype takes. */
export function valuesOf(datatype: NumericDatatype): DatatypeValues {
  return NUMERIC[datatype].values;
}

/**
 * For FP32 and FP64, whose arrays store numbers as they are: the magnitude from which a number
 * overflows to infinity; undefined for every other datatype.
 */
export function floatOverflow(datatype: NumericDatatype): number | undefined {
  const values = NUMERIC[datatype].values;
  return values.kind === "float" && datatype !== "FP16" ? values.overflow : undefined;
}

/**
 * The V2 datatype of an onnxruntime-node element type (`"float32"` → FP32, `"string"` → BYTES);
 * undefined for types V2 has no datatype for (`"int4"`, `"uint4"`, `"bfloat16"`, ...).
 */
export function fromOnnxType(type: TensorType): NumericDatatype;
export function fromOnnxType(type: string): V2Datatype | undefined;
export function fromOnnxType(type: string): V2Datatype | undefined {
  if (type === "string") return "BYTES";
  return V2_DATATYPES.find((datatype) => isNumeric(datatype) && NUMERIC[datatype].onnx === type);
}

/**
 * The onnxruntime-node element type of a V2 datatype. Every datatype has one; BYTES maps to
 * `"string"`, whose tensors hold JavaScript strings, so its elements need decoding from UTF-8.
 */
export function toOnnxType(datatype: V2Datatype): OnnxType {
  return isNumeric(datatype) ? NUMERIC[datatype].onnx : "string";
}

/** True when `type` is an element type `shoal/onnx` serves. */
export function isTensorType(type: string): type is TensorType {
  return (TENSOR_TYPES as readonly string[]).includes(type);
}

/** The typed array class that holds a {@link TensorType}'s elements (`bool`: one byte, 0 or 1). */
export function arrayOf(type: TensorType): TypedArrayClass {
  return NUMERIC[fromOnnxType(type)].array;
}

/** Whether `data` is the kind of array that holds `datatype` in a V2 tensor. */
export function holds(datatype: V2Datatype, data: unknown): data is TypedArray | Uint8Array[] {
  if (isNumeric(datatype)) return data instanceof NUMERIC[datatype].array;
  return Array.isArray(data) && data.every((element) => element instanceof Uint8Array);
}
