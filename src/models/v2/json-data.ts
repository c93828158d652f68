/**
 * Tensor data in JSON: reading `data` (flat or nested, row-major) into the arrays a
 * {@link V2Tensor} holds, and writing those arrays back as flat JSON lists.
 *
 * JSON cannot hold every value exactly, so some travel as strings, both ways:
 * - 64-bit integers beyond ±(2^53 - 1) are decimal strings (`"9223372036854775807"`): a JSON
 *   number that large has already lost digits when JSON.parse (and most JSON readers) read it.
 *   Smaller ones are numbers. Requests may send any INT64/UINT64 value as a decimal string.
 * - NaN and ±Infinity in FP16, FP32 and FP64 are the strings `"NaN"`, `"Infinity"` and
 *   `"-Infinity"` (Python's float() and numpy read them). Requests may also send null for NaN.
 *   A JSON number beyond the datatype's range is refused rather than read as an infinity: 1e400
 *   reads as Infinity in JSON.parse, and 1e39 would become one as FP32 (70000 as FP16).
 * - FP16 elements are plain numbers, rounded to the nearest half float on the way in.
 * - BYTES elements are strings, UTF-8 encoded on the way in; bytes that are not UTF-8 cannot be
 *   sent as JSON and need the binary extension.
 */
import { ClientError } from "../../errors.js";
import { FLOAT32_OVERFLOW, formatShape, type TypedArray } from "../../runtimes/tensor.js";
import { shortestByPrecision, shortestFloat32 } from "../../runtimes/tensor-json.js";
import { elementCount, isNumeric, typedArrayFor } from "./datatypes.js";
import { halfToNumber, numberToHalf } from "./fp16.js";
import type { V2Datatype } from "./types.js";

type Element = number | bigint | Uint8Array;

/** Reads one JSON element for a datatype, or says what the datatype takes. */
interface ElementReader {
  read(value: unknown): Element | undefined;
  /** What the datatype takes, for error messages: "<datatype> takes ...". */
  takes: string;
}

const NON_FINITE = new Map([
  ["NaN", NaN],
  ["Infinity", Infinity],
  ["-Infinity", -Infinity],
]);

/**
 * The smallest magnitude each float datatype rounds to infinity: halfway from its largest finite
 * value to the next power of two (the tie goes to the even neighbour, infinity).
 */
const OVERFLOW = { FP16: 65520, FP32: FLOAT32_OVERFLOW, FP64: Infinity } as const;

type FloatDatatype = keyof typeof OVERFLOW;

function floats(datatype: FloatDatatype, convert: (x: number) => number = (x) => x): ElementReader {
  const bound = OVERFLOW[datatype];
  return {
    read: (v) => {
      if (typeof v === "number") return v < bound && v > -bound ? convert(v) : undefined;
      if (v === null) return convert(NaN);
      const x = typeof v === "string" ? NON_FINITE.get(v) : undefined;
      return x === undefined ? undefined : convert(x);
    },
    takes: FLOATS,
  };
}

function integers(bits: 8 | 16 | 32, signed: boolean): ElementReader {
  const min = signed ? -(2 ** (bits - 1)) : 0;
  const max = signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
  return {
    read: (v) => (typeof v === "number" && Number.isInteger(v) && v >= min && v <= max ? v : undefined),
    takes: `whole numbers from ${min} to ${max}`,
  };
}

const DECIMAL = /^-?[0-9]+$/;

function bigIntegers(signed: boolean): ElementReader {
  const min = signed ? -(2n ** 63n) : 0n;
  const max = signed ? 2n ** 63n - 1n : 2n ** 64n - 1n;
  const read = (v: unknown): bigint | undefined => {
    const b = typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : typeof v === "string" && DECIMAL.test(v) ? BigInt(v) : undefined;
    return b !== undefined && b >= min && b <= max ? b : undefined;
  };
  return { read, takes: `whole numbers from ${min} to ${max} (beyond 2^53 - 1 as decimal strings)` };
}

const FLOATS = 'numbers, null (NaN) or the strings "NaN", "Infinity" and "-Infinity"';
const utf8Encoder = new TextEncoder();

const READERS: Record<V2Datatype, ElementReader> = {
  BOOL: { read: (v) => (v === true || v === 1 ? 1 : v === false || v === 0 ? 0 : undefined), takes: "true or false (or 1 or 0)" },
  UINT8: integers(8, false),
  UINT16: integers(16, false),
  UINT32: integers(32, false),
  UINT64: bigIntegers(false),
  INT8: integers(8, true),
  INT16: integers(16, true),
  INT32: integers(32, true),
  INT64: bigIntegers(true),
  FP16: floats("FP16", numberToHalf),
  FP32: floats("FP32"),
  FP64: floats("FP64"),
  BYTES: { read: (v) => (typeof v === "string" ? utf8Encoder.encode(v) : undefined), takes: "strings" },
};

/** A value as JSON would write it, cut short, for error messages. */
export function describe(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    // A bigint or a cycle, from a model's output: JSON has no text for them.
  }
  text ??= String(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/** Where an element sits in `data`: `data[1][2]`. */
function dataPath(index: readonly number[]): string {
  return `data${index.map((i) => `[${i}]`).join("")}`;
}

function badElement(where: string, datatype: V2Datatype, index: readonly number[], value: unknown): ClientError {
  const at = dataPath(index);
  if ((datatype === "INT64" || datatype === "UINT64") && typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return new ClientError(`${where}: ${at} is ${value}, beyond 2^53 - 1 where JSON numbers lose digits; send ${datatype} values that large as decimal strings`);
  }
  if (typeof value === "number" && Object.hasOwn(OVERFLOW, datatype)) {
    // JSON has no Infinity: a number that reads as one was written too large for a double.
    const beyond = Number.isFinite(value) ? `${value}, beyond the range of ${datatype}` : `a number beyond the range of doubles (it reads as ${value})`;
    return new ClientError(`${where}: ${at} is ${beyond}; send an infinity as the string "Infinity" or "-Infinity"`);
  }
  return new ClientError(`${where}: ${at} is ${describe(value)}; ${datatype} takes ${READERS[datatype].takes}`);
}

/**
 * Reads a tensor's JSON `data` into a typed array (or, for BYTES, a list of byte arrays), checking
 * it against the shape. `data` is either flat, a list of the shape's element count, or nested
 * exactly as the shape (a bare value for a scalar). `maxElements` bounds the count a shape may ask
 * for before anything is allocated: no JSON text of n bytes holds more than n elements.
 * Throws a {@link ClientError} naming `where` (e.g. "input 'x'") and the element at fault.
 */
export function readJsonData(where: string, datatype: V2Datatype, shape: readonly number[], data: unknown, maxElements: number): TypedArray | Uint8Array[] {
  const count = elementCount(shape);
  const flat = Array.isArray(data) && !(data.length > 0 && Array.isArray(data[0]));
  if (flat && data.length !== count) throw new ClientError(`${where}: data has ${data.length} elements where shape ${formatShape(shape)} needs ${count}`);
  if (count > maxElements) throw new ClientError(`${where}: shape ${formatShape(shape)} needs ${count} elements, more than the JSON could hold`);
  const out: TypedArray | Uint8Array[] = isNumeric(datatype) ? new (typedArrayFor(datatype))(count) : new Array<Uint8Array>(count);
  const { read } = READERS[datatype];
  // The index being filled, one entry per level, only read for error messages.
  const index: number[] = [];
  let at = 0;
  const put = (value: unknown): void => {
    const element = read(value);
    if (element === undefined) throw badElement(where, datatype, index, value);
    (out as Element[])[at++] = element;
  };
  if (flat) {
    for (let i = 0; i < count; i++) {
      index[0] = i;
      put(data[i]);
    }
    return out;
  }
  const nesting = (got: string): ClientError => new ClientError(`${where}: data is neither flat nor nested as shape ${formatShape(shape)}: ${dataPath(index)} ${got}`);
  const fill = (value: unknown, depth: number): void => {
    if (depth === shape.length) {
      if (Array.isArray(value)) throw nesting("is a list where a single value was expected");
      return put(value);
    }
    if (!Array.isArray(value)) throw nesting(`is a single value where a list of ${shape[depth]} was expected`);
    if (value.length !== shape[depth]) throw nesting(`has ${value.length} elements where ${shape[depth]} were expected`);
    for (let i = 0; i < value.length; i++) {
      index[depth] = i;
      fill(value[i], depth + 1);
    }
    index.length = depth;
  };
  fill(data, 0);
  return out;
}

/** A float for JSON: NaN and ±Infinity as their names, finite values as `write` gives them. */
function float(value: number, write: (x: number) => number = (x) => x): number | string {
  return Number.isFinite(value) ? write(value) : String(value);
}

// FP32 and FP16 values are written with the fewest significant digits that read back to the same
// value (FP32 by shortestFloat32; FP16 trying 3 and 4 digits, 5 always do), not as the longer exact
// double: 0.1 rather than 0.10000000149011612.
const toHalfPrecision = (x: number): number => halfToNumber(numberToHalf(x));
const shortHalf = (x: number): number => shortestByPrecision(x, toHalfPrecision, 3, 5);

function bigInteger(value: bigint): number | string {
  return value >= -Number.MAX_SAFE_INTEGER && value <= Number.MAX_SAFE_INTEGER ? Number(value) : value.toString();
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A tensor's data as a flat JSON list (see the module comment for the values that become strings).
 * Throws a {@link ClientError} for a BYTES element that is not UTF-8: only the binary extension
 * can carry it.
 */
export function writeJsonData(where: string, datatype: V2Datatype, data: TypedArray | Uint8Array[]): unknown[] {
  switch (datatype) {
    case "BOOL":
      return Array.from(data as Uint8Array, (x) => x !== 0);
    case "INT64":
    case "UINT64":
      return Array.from(data as BigInt64Array, (x) => bigInteger(x));
    case "FP16":
      return Array.from(data as Uint16Array, (bits) => float(halfToNumber(bits), shortHalf));
    case "FP32":
      return Array.from(data as Float32Array, (x) => float(x, shortestFloat32));
    case "FP64":
      return Array.from(data as Float64Array, (x) => float(x));
    case "BYTES":
      return (data as Uint8Array[]).map((bytes, i) => {
        try {
          return utf8.decode(bytes);
        } catch {
          throw new ClientError(`${where}: BYTES element ${i} is not valid UTF-8, so it cannot be a JSON string; only binary data can carry it`);
        }
      });
    default:
      return Array.from(data as Int32Array);
  }
}
