/**
 * Tensors as the ONNX runtime moves them: flat typed arrays in row-major order with a shape.
 * Reads them from request values (nested arrays, `{ data, shape }`, raw bytes), checks them
 * against what a model expects, and stacks and splits them along a batch axis.
 */
import { ValidationError } from "../errors.js";
import { ElementBudget } from "./limits.js";

/** The element types served, by ONNX Runtime's names (which are also numpy's). */
export type TensorType = "float32" | "float64" | "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64" | "bool";

/** The typed array that holds each element type (`bool` is one byte, 0 or 1). */
export const ARRAY_OF = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
} as const;

/** A typed array of one of the {@link TensorType}s. */
export type TypedArray = InstanceType<(typeof ARRAY_OF)[TensorType]>;

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

/** True when `type` is an element type this module serves. */
export function isTensorType(type: string): type is TensorType {
  return Object.hasOwn(ARRAY_OF, type);
}

/** True when a dimension of a model's shape is dynamic (named, or of unknown size). */
export function isDynamic(dim: number | string): boolean {
  return typeof dim !== "number" || dim < 0;
}

/** A shape as people write it: `[batch, 64]`. */
export function formatShape(shape: readonly (number | string)[]): string {
  return `[${shape.join(", ")}]`;
}

function size(shape: readonly number[], from = 0, to = shape.length): number {
  let n = 1;
  for (let i = from; i < to; i++) n *= shape[i]!;
  return n;
}

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
    shape = [];
    for (let v = value; Array.isArray(v); v = v[0]) shape.push(v.length);
  }
  // The shape is checked against the model, then against the lists that claim it, then against
  // the request's limits, and only then is an array of its size made.
  checkShape(spec, where, expected, shape);
  const nested = !isPlainObject(value);
  if (nested) checkRectangular(where, expected, value, shape);
  const count = size(shape);
  const over = budget.take(count);
  if (over !== undefined) throw new ValidationError(`${where}: ${over}`);
  const data = nested ? nestedData(spec, where, value, shape, count) : flatData(spec, where, expected, value.data, count);
  return { type: spec.type, shape, data };
}

function checkShape(spec: TensorSpec, where: string, expected: string, shape: readonly number[]): void {
  const fits = shape.length === spec.shape.length && spec.shape.every((dim, i) => isDynamic(dim) || dim === shape[i]);
  if (!fits) throw new ValidationError(`${where} expects ${expected}; got shape ${formatShape(shape)}`);
}

// Elements of each kind of type, checked as they are copied. The checks cost little next to
// parsing the JSON they came from.
type Kind = "float" | "int" | "bigint" | "bool";

function kindOf(type: TensorType): Kind {
  if (type === "float32" || type === "float64") return "float";
  if (type === "int64" || type === "uint64") return "bigint";
  if (type === "bool") return "bool";
  return "int";
}

const RANGE: Partial<Record<TensorType, [number, number] | [bigint, bigint]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int16: [-32768, 32767],
  uint16: [0, 65535],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

/**
 * The smallest magnitude that rounds to infinity as a float32: halfway from its largest value,
 * 2^128 - 2^104, to 2^128 (the tie goes to the even neighbour, infinity).
 */
export const FLOAT32_OVERFLOW = 2 ** 128 - 2 ** 103;

// Floats above these magnitudes, infinities and NaN have no place in a list of numbers: a JSON
// number that large has overflowed (1e400 reads as Infinity), and would reach the model as one.
const FLOAT_BOUND = { float32: FLOAT32_OVERFLOW, float64: Infinity } as const;

// One element, converted to what the typed array stores; undefined when it does not fit the type.
function element(type: TensorType, kind: Kind, v: unknown): number | bigint | undefined {
  switch (kind) {
    case "float": {
      const bound = FLOAT_BOUND[type as "float32" | "float64"];
      return typeof v === "number" && v < bound && v > -bound ? v : undefined;
    }
    case "bool":
      return v === true || v === 1 ? 1 : v === false || v === 0 ? 0 : undefined;
    case "int": {
      const [min, max] = RANGE[type] as [number, number];
      const n = typeof v === "bigint" ? Number(v) : v;
      return typeof n === "number" && Number.isInteger(n) && n >= min && n <= max ? n : undefined;
    }
    case "bigint": {
      const [min, max] = RANGE[type] as [bigint, bigint];
      const b = typeof v === "bigint" ? v : typeof v === "number" && Number.isInteger(v) ? BigInt(v) : undefined;
      return b !== undefined && b >= min && b <= max ? b : undefined;
    }
  }
}

function badElement(where: string, type: TensorType, at: string, v: unknown): ValidationError {
  const got = typeof v === "string" ? `the string ${JSON.stringify(v.length > 20 ? `${v.slice(0, 17)}...` : v)}` : Array.isArray(v) ? "a list" : String(v);
  const kind = kindOf(type);
  if (kind === "float" && typeof v === "number") {
    return new ValidationError(`${where} expects finite ${type} values within its range (NaN and infinities travel as binary data only); element ${at} is ${got}`);
  }
  const want = type === "bool" ? "true, false, 0 or 1" : kind === "float" ? "numbers" : `whole numbers in the range of ${type}`;
  return new ValidationError(`${where} expects ${type} values (${want}); element ${at} is ${got}`);
}

function flatData(spec: TensorSpec, where: string, expected: string, data: unknown, count: number): TypedArray {
  const Array_ = ARRAY_OF[spec.type];
  if (Array.isArray(data)) {
    if (data.length !== count) throw new ValidationError(`${where}: "data" has ${data.length} values where its shape needs ${count}; expected ${expected}`);
    const out = new Array_(count);
    const kind = kindOf(spec.type);
    for (let i = 0; i < count; i++) {
      const v = element(spec.type, kind, data[i]);
      if (v === undefined) throw badElement(where, spec.type, `[${i}]`, data[i]);
      out[i] = v as never;
    }
    return out;
  }
  if (data instanceof Array_) {
    if (data.length !== count) throw new ValidationError(`${where}: "data" has ${data.length} values where its shape needs ${count}; expected ${expected}`);
    return data as TypedArray;
  }
  if (data instanceof Uint8Array) {
    // Raw little-endian bytes (msgpack `bin`). Copied to a buffer of their own: the view may sit
    // at an offset that the element type cannot be read at.
    const bytes = count * Array_.BYTES_PER_ELEMENT;
    if (data.byteLength !== bytes) throw new ValidationError(`${where}: "data" has ${data.byteLength} bytes where ${count} ${spec.type} values take ${bytes}; expected ${expected}`);
    return new Array_(Uint8Array.prototype.slice.call(data).buffer);
  }
  const got = ArrayBuffer.isView(data) ? data.constructor.name : typeof data;
  throw new ValidationError(`${where}: "data" must be a list of numbers, a ${Array_.name} or its bytes; got ${got}, expected ${expected}`);
}

// Checks that every list of nested arrays has the length its level's first list gave `shape`,
// down to the lists of elements (whose elements are checked as they are read). A few lists that
// claim a large shape are refused here, before an array of that shape is made.
function checkRectangular(where: string, expected: string, value: unknown, shape: readonly number[]): void {
  // The index being checked, one entry per level, for error messages.
  const path: number[] = [];
  const walk = (list: readonly unknown[], depth: number): void => {
    if (depth === shape.length - 1) return;
    for (let i = 0; i < list.length; i++) {
      path[depth] = i;
      const v = list[i];
      if (!Array.isArray(v) || v.length !== shape[depth + 1]) {
        const got = Array.isArray(v) ? `${v.length} values` : "a single value";
        throw new ValidationError(`${where} is not rectangular: ${formatShape(path)} has ${got} where ${shape[depth + 1]} were expected; expected ${expected}`);
      }
      walk(v, depth + 1);
    }
    path.length = depth;
  };
  if (shape.length > 0) walk(value as unknown[], 0);
}

// The elements of rectangular nested arrays of `shape`, `count` of them, in row-major order.
function nestedData(spec: TensorSpec, where: string, value: unknown, shape: readonly number[], count: number): TypedArray {
  const out = new ARRAY_OF[spec.type](count);
  const kind = kindOf(spec.type);
  let at = 0;
  // The index being filled, one entry per level, for error messages.
  const path: number[] = [];
  const fill = (v: unknown, depth: number): void => {
    if (depth === shape.length) {
      const e = element(spec.type, kind, v);
      if (e === undefined) throw badElement(where, spec.type, formatShape(path), v);
      out[at++] = e as never;
      return;
    }
    const list = v as unknown[];
    if (kind === "float" && depth === shape.length - 1) {
      // The common case, a row of floats, in a loop of its own: this is most of reading a request.
      const row = out.subarray(at, at + list.length) as Float32Array | Float64Array;
      const bound = FLOAT_BOUND[spec.type as "float32" | "float64"];
      for (let i = 0; i < list.length; i++) {
        const x: unknown = list[i];
        if (!(typeof x === "number" && x < bound && x > -bound)) {
          path[depth] = i;
          throw badElement(where, spec.type, formatShape(path), x);
        }
        row[i] = x;
      }
      at += list.length;
      return;
    }
    for (let i = 0; i < list.length; i++) {
      path[depth] = i;
      fill(list[i], depth + 1);
    }
    path.length = depth;
  };
  fill(value, 0);
  return out;
}

/** Stacks tensors that agree on every dimension but `axis` along it. */
export function concat(parts: readonly TensorValue[], axis: number): TensorValue {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const shape = [...first.shape];
  shape[axis] = parts.reduce((sum, p) => sum + p.shape[axis]!, 0);
  const out = new ARRAY_OF[first.type](size(shape));
  const outer = size(shape, 0, axis);
  const inner = size(shape, axis + 1);
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
  const outer = size(shape, 0, axis);
  const inner = size(shape, axis + 1);
  const row = shape[axis]! * inner;
  let offset = 0;
  return sizes.map((rows) => {
    const partShape = [...shape];
    partShape[axis] = rows;
    const n = rows * inner;
    const out = new ARRAY_OF[type](outer * n);
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
  const x = new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  const y = new Uint8Array(b.data.buffer, b.data.byteOffset, b.data.byteLength);
  return Buffer.compare(x, y) === 0;
}

/** A tensor as nested arrays, for JSON: 64-bit integers become numbers, `bool` true and false. */
export function toNested(tensor: TensorValue): unknown {
  const { type, shape, data } = tensor;
  const scalar = type === "bool" ? (i: number) => data[i] !== 0 : kindOf(type) === "bigint" ? (i: number) => Number(data[i]) : (i: number) => data[i];
  let at = 0;
  const build = (depth: number): unknown => {
    if (depth === shape.length) return scalar(at++);
    const list = new Array(shape[depth]);
    for (let i = 0; i < list.length; i++) list[i] = build(depth + 1);
    return list;
  };
  return build(0);
}
