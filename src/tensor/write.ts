/**
 * Tensor elements as JSON values, in the two forms Shoal answers with:
 * - plain (`shoal/onnx`'s nested arrays, as tensor-json.ts writes them): every element a JSON
 *   number (64-bit integers exact up to 2^53; NaN and the infinities become null in
 *   `JSON.stringify`), bool as true and false;
 * - exact (the V2 protocol's, see v2/json-data.ts): nothing lost, so 64-bit integers beyond
 *   ±(2^53 - 1) are decimal strings, NaN and ±Infinity the strings "NaN", "Infinity" and
 *   "-Infinity", and FP32 and FP16 values the fewest digits that read back as the same value.
 */
import { fromOnnxType, type NumericDatatype, type TypedArray } from "./datatypes.js";
import { halfToNumber, numberToHalf } from "./fp16.js";
import type { TensorValue } from "./tensor.js";
import { shortestByPrecision, shortestFloat32 } from "./tensor-json.js";

/** A float for exact JSON: NaN and ±Infinity as their names, finite values as `write` gives them. */
function float(value: number, write: (x: number) => number = (x) => x): number | string {
  return Number.isFinite(value) ? write(value) : String(value);
}

// FP16 values are written with the fewest significant digits that read back to the same value
// (trying 3 and 4 digits, 5 always do), as FP32 values are by shortestFloat32: 0.1 rather than
// the longer exact double.
const toHalfPrecision = (x: number): number => halfToNumber(numberToHalf(x));
const shortHalf = (x: number): number => shortestByPrecision(x, toHalfPrecision, 3, 5);

function bigInteger(value: bigint): number | string {
  return value >= -Number.MAX_SAFE_INTEGER && value <= Number.MAX_SAFE_INTEGER ? Number(value) : value.toString();
}

/** The elements of `data`, of `datatype`, as a flat list of JSON values: `exact` or plain. */
export function jsonElements(datatype: NumericDatatype, data: TypedArray, exact: boolean): unknown[] {
  switch (datatype) {
    case "BOOL":
      return Array.from(data as Uint8Array, (x) => x !== 0);
    case "INT64":
    case "UINT64":
      return Array.from(data as BigInt64Array, exact ? bigInteger : Number);
    case "FP16":
      return Array.from(data as Uint16Array, exact ? (bits) => float(halfToNumber(bits), shortHalf) : halfToNumber);
    case "FP32":
      return exact ? Array.from(data as Float32Array, (x) => float(x, shortestFloat32)) : Array.from(data as Float32Array);
    case "FP64":
      return exact ? Array.from(data as Float64Array, (x) => float(x)) : Array.from(data as Float64Array);
    default:
      return Array.from(data as Int32Array);
  }
}

/** A tensor as nested arrays, for JSON: plain elements, nested as its shape (a bare value for a scalar). */
export function toNested(tensor: TensorValue): unknown {
  const { type, shape, data } = tensor;
  const elements = jsonElements(fromOnnxType(type), data, false);
  let at = 0;
  const build = (depth: number): unknown => {
    if (depth === shape.length) return elements[at++];
    const list = new Array(shape[depth]);
    for (let i = 0; i < list.length; i++) list[i] = build(depth + 1);
    return list;
  };
  return build(0);
}
