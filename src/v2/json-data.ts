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
import { ClientError } from "../errors.js";
import { floatOverflow, isNumeric, typedArrayFor, V2_DATATYPES, valuesOf, type TypedArray, type V2Datatype } from "../tensor/datatypes.js";
import { numberToHalf } from "../tensor/fp16.js";
import { findNestingFault, readBool, readElements, type ElementReader } from "../tensor/nested.js";
import { elementCount, formatShape } from "../tensor/shape.js";
import { jsonElements } from "../tensor/write.js";

const NON_FINITE = new Map([
  ["NaN", NaN],
  ["Infinity", Infinity],
  ["-Infinity", -Infinity],
]);

const DECIMAL = /^-?[0-9]+$/;
const FLOATS = 'numbers, null (NaN) or the strings "NaN", "Infinity" and "-Infinity"';
const utf8Encoder = new TextEncoder();

/** How JSON gives the elements of one datatype, and what it takes, for error messages: "<datatype> takes ...". */
function jsonReader(datatype: V2Datatype): { read: ElementReader; takes: string } {
  if (datatype === "BYTES") return { read: (v) => (typeof v === "string" ? utf8Encoder.encode(v) : undefined), takes: "strings" };
  const values = valuesOf(datatype);
  switch (values.kind) {
    case "bool":
      return { read: readBool, takes: "true or false (or 1 or 0)" };
    case "int": {
      const { min, max } = values;
      return { read: (v) => (typeof v === "number" && Number.isInteger(v) && v >= min && v <= max ? v : undefined), takes: `whole numbers from ${min} to ${max}` };
    }
    case "bigint": {
      const { min, max } = values;
      const read = (v: unknown): bigint | undefined => {
        const b = typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : typeof v === "string" && DECIMAL.test(v) ? BigInt(v) : undefined;
        return b !== undefined && b >= min && b <= max ? b : undefined;
      };
      return { read, takes: `whole numbers from ${min} to ${max} (beyond 2^53 - 1 as decimal strings)` };
    }
    case "float": {
      const bound = values.overflow;
      const convert = datatype === "FP16" ? numberToHalf : (x: number) => x;
      const read = (v: unknown): number | undefined => {
        if (typeof v === "number") return v < bound && v > -bound ? convert(v) : undefined;
        if (v === null) return convert(NaN);
        const x = typeof v === "string" ? NON_FINITE.get(v) : undefined;
        return x === undefined ? undefined : convert(x);
      };
      return { read, takes: FLOATS };
    }
  }
}

const READERS = Object.fromEntries(V2_DATATYPES.map((datatype) => [datatype, jsonReader(datatype)])) as Record<V2Datatype, ReturnType<typeof jsonReader>>;

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
  if (typeof value === "number" && isNumeric(datatype) && valuesOf(datatype).kind === "float") {
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
  const nesting = (index: readonly number[], got: string): ClientError => new ClientError(`${where}: data is neither flat nor nested as shape ${formatShape(shape)}: ${dataPath(index)} ${got}`);
  const fault = flat ? undefined : findNestingFault(data, shape);
  if (fault !== undefined) {
    const got = Array.isArray(fault.value) ? `has ${fault.value.length} elements where ${fault.expected} were expected` : `is a single value where a list of ${fault.expected} was expected`;
    throw nesting(fault.index, got);
  }
  const numeric = isNumeric(datatype);
  const out: TypedArray | Uint8Array[] = numeric ? new (typedArrayFor(datatype))(count) : new Array<Uint8Array>(count);
  const bad = (index: readonly number[], value: unknown): ClientError =>
    !flat && Array.isArray(value) ? nesting(index, "is a list where a single value was expected") : badElement(where, datatype, index, value);
  readElements(data, flat ? [count] : shape, out, READERS[datatype].read, bad, numeric ? floatOverflow(datatype) : undefined);
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A tensor's data as a flat JSON list (see the module comment for the values that become strings).
 * Throws a {@link ClientError} for a BYTES element that is not UTF-8: only the binary extension
 * can carry it.
 */
export function writeJsonData(where: string, datatype: V2Datatype, data: TypedArray | Uint8Array[]): unknown[] {
  if (isNumeric(datatype)) return jsonElements(datatype, data as TypedArray, true);
  return (data as Uint8Array[]).map((bytes, i) => {
    try {
      return utf8.decode(bytes);
    } catch {
      throw new ClientError(`${where}: BYTES element ${i} is not valid UTF-8, so it cannot be a JSON string; only binary data can carry it`);
    }
  });
}
