/**
 * Reading the value a request gives for one model input (nested lists, `{ data, shape }`, raw
 * bytes) into a {@link TensorValue}, checked against what the model expects of it.
 */
import { ValidationError } from "../errors.js";
import { ElementBudget } from "./element-budget.js";
import { fromBytes } from "./bytes.js";
import { arrayOf, floatOverflow, fromOnnxType, valuesOf, type TensorType, type TypedArray } from "./datatypes.js";
import { findNestingFault, nestedShape, readBool, readElements, type ElementReader } from "./nested.js";
import { elementCount, formatShape, isDynamic } from "./shape.js";
import type { TensorSpec, TensorValue } from "./tensor.js";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/**
 * Reads the value a request gives for the input `spec` and checks its element type and shape.
 * Accepts nested arrays (a bare number for a scalar), or `{ data, shape }` with `data` a flat list
 * of numbers, a typed array of the input's type, or its raw little-endian bytes. Float elements in
 * lists are finite numbers within the type's range (NaN and infinities travel as binary data only).
 * The tensor's elements are taken from `budget`, the request's limits, before any array of them
 * is made. Throws a {@link ValidationError} that names the input and what it expects.
 */
export function readTensor(spec: TensorSpec, value: unknown, budget: ElementBudget = new ElementBudget()): TensorValue {
  const where = `input '${spec.name}'`;
  const expected = `${spec.type} ${formatShape(spec.shape)}`;
  let shape: number[];
  if (isPlainObject(value)) {
    const unknown = Object.keys(value).filter((key) => key !== "data" && key !== "shape" && key !== "type");
    if (unknown.length > 0 || !("data" in value) || !("shape" in value)) {
      throw new ValidationError(`${where} must be nested arrays or { "data": [...], "shape": [...] }, expected ${expected}`);
    }
    if (value.type !== undefined && value.type !== spec.type) throw new ValidationError(`${where} expects ${expected}; got type ${String(value.type)}`);
    if (!Array.isArray(value.shape) || !value.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new ValidationError(`${where}: "shape" must be a list of whole numbers, expected ${expected}`);
    }
    shape = value.shape;
  } else if (ArrayBuffer.isView(value)) {
    throw new ValidationError(`${where}: give binary data with its shape, as { "data": ..., "shape": [...] }; expected ${expected}`);
  } else {
    shape = nestedShape(value);
  }
  // The shape is checked against the model, then against the lists that claim it, then against
  // the request's limits, and only then is an array of its size made.
  const fits = shape.length === spec.shape.length && spec.shape.every((dim, i) => isDynamic(dim) || dim === shape[i]);
  if (!fits) throw new ValidationError(`${where} expects ${expected}; got shape ${formatShape(shape)}`);
  const nested = !isPlainObject(value);
  const fault = nested ? findNestingFault(value, shape) : undefined;
  if (fault !== undefined) {
    const got = Array.isArray(fault.value) ? `${fault.value.length} values` : "a single value";
    throw new ValidationError(`${where} is not rectangular: ${formatShape(fault.index)} has ${got} where ${fault.expected} were expected; expected ${expected}`);
  }
  const count = elementCount(shape);
  const over = budget.take(count);
  if (over !== undefined) throw new ValidationError(`${where}: ${over}`);
  const data = nested ? nestedData(spec.type, where, value, shape, count) : flatData(spec.type, where, expected, value.data, count);
  return { type: spec.type, shape, data };
}

/**
 * How a request's lists give each element type: numbers (or bigints, which MessagePack gives for
 * 64-bit integers) within the type's range, and for bool also true and false. A float's range
 * excludes NaN and the infinities: a JSON number that large has overflowed (1e400 reads as
 * Infinity), and would reach the model as one. The checks cost little next to parsing the JSON
 * the elements came from.
 */
function elementReader(type: TensorType): ElementReader {
  const values = valuesOf(fromOnnxType(type));
  switch (values.kind) {
    case "float": {
      const bound = values.overflow;
      return (v) => (typeof v === "number" && v < bound && v > -bound ? v : undefined);
    }
    case "bool":
      return readBool;
    case "int": {
      const { min, max } = values;
      return (v) => {
        const n = typeof v === "bigint" ? Number(v) : v;
        return typeof n === "number" && Number.isInteger(n) && n >= min && n <= max ? n : undefined;
      };
    }
    case "bigint": {
      const { min, max } = values;
      return (v) => {
        const b = typeof v === "bigint" ? v : typeof v === "number" && Number.isInteger(v) ? BigInt(v) : undefined;
        return b !== undefined && b >= min && b <= max ? b : undefined;
      };
    }
  }
}

function badElement(where: string, type: TensorType, index: readonly number[], v: unknown): ValidationError {
  const at = formatShape(index);
  const got = typeof v === "string" ? `the string ${JSON.stringify(v.length > 20 ? `${v.slice(0, 17)}...` : v)}` : Array.isArray(v) ? "a list" : String(v);
  const kind = valuesOf(fromOnnxType(type)).kind;
  if (kind === "float" && typeof v === "number") {
    return new ValidationError(`${where} expects finite ${type} values within its range (NaN and infinities travel as binary data only); element ${at} is ${got}`);
  }
  const want = type === "bool" ? "true, false, 0 or 1" : kind === "float" ? "numbers" : `whole numbers in the range of ${type}`;
  return new ValidationError(`${where} expects ${type} values (${want}); element ${at} is ${got}`);
}

function flatData(type: TensorType, where: string, expected: string, data: unknown, count: number): TypedArray {
  const array = arrayOf(type);
  if (Array.isArray(data) || data instanceof array) {
    if (data.length !== count) throw new ValidationError(`${where}: "data" has ${data.length} values where its shape needs ${count}; expected ${expected}`);
    if (!Array.isArray(data)) return data as TypedArray;
    const out = new array(count);
    readElements(data, [count], out, elementReader(type), (index, v) => badElement(where, type, index, v), floatOverflow(fromOnnxType(type)));
    return out;
  }
  if (data instanceof Uint8Array) {
    // Raw little-endian bytes (msgpack `bin`). Copied to a buffer of their own: the view may sit
    // at an offset that the element type cannot be read at.
    const bytes = count * array.BYTES_PER_ELEMENT;
    if (data.byteLength !== bytes) throw new ValidationError(`${where}: "data" has ${data.byteLength} bytes where ${count} ${type} values take ${bytes}; expected ${expected}`);
    return fromBytes(array, data);
  }
  const got = ArrayBuffer.isView(data) ? data.constructor.name : typeof data;
  throw new ValidationError(`${where}: "data" must be a list of numbers, a ${array.name} or its bytes; got ${got}, expected ${expected}`);
}

// The elements of rectangular nested arrays of `shape`, `count` of them, in row-major order.
function nestedData(type: TensorType, where: string, value: unknown, shape: readonly number[], count: number): TypedArray {
  const out = new (arrayOf(type))(count);
  readElements(value, shape, out, elementReader(type), (index, v) => badElement(where, type, index, v), floatOverflow(fromOnnxType(type)));
  return out;
}
