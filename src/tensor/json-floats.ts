/**
 * Reads a JSON request whose fields are float tensors, `{"input": [[0.1, 2, ...], ...]}`, straight
 * from its bytes into typed arrays. `JSON.parse` makes a JS number and an array slot of every element
 * before they are copied into the typed array the model takes; for a row of a thousand floats that
 * is most of reading the request.
 *
 * It reads a strict subset of JSON: one object, each field a float input of the model, each value
 * rectangular nested arrays of numbers, all ASCII. Anything else (another field, a string, an empty
 * or ragged array, an escape, a malformed number, a number beyond the range of its input's type)
 * makes it give up, and the caller reads the body with `JSON.parse` as before, which also gives
 * the errors. Numbers come out exactly as `JSON.parse` gives them.
 */
import { ValidationError } from "../errors.js";
import { FLOAT32_OVERFLOW } from "./datatypes.js";
import type { TensorValue } from "./tensor.js";
import { EXACT } from "./tensor-json.js";

/** The element type of each float input, by name. */
export type FloatInputs = ReadonlyMap<string, "float32" | "float64">;

// A mantissa of at most 15 digits times or over an exact power of ten (EXACT) is a single rounding,
// the same as JSON.parse's.
const MAX_DIGITS = 15;
const MAX_DEPTH = 32;

/** The elements read so far, reused by every request a thread reads. */
const INITIAL = 4096;
let values = new Float64Array(INITIAL);
// Past this many elements (1 MiB) the buffer grown for a large request is let go after it.
const KEEP = 131_072;

class Reader {
  at = 0;
  count = 0;
  /** The elements of every field so far. */
  total = 0;
  /** Whether the numbers being read go to a float32 tensor (a float64 one otherwise). */
  float32 = false;
  /** Size of each dimension, as the first array at each depth gave it. */
  shape: number[] = [];
  /** How deep the numbers sit, 1 for a flat list (-1: none read yet). */
  leafDepth = -1;

  constructor(
    readonly bytes: Uint8Array,
    /** Most elements of all fields together. */
    readonly maxElements: number,
  ) {}

  /** Skips whitespace; the next byte (undefined at the end). */
  space(): number | undefined {
    const b = this.bytes;
    let c = b[this.at]!;
    while (c === 32 || c === 10 || c === 13 || c === 9) c = b[++this.at]!;
    return c;
  }

  /** A field name without escapes; undefined otherwise. */
  key(): string | undefined {
    const b = this.bytes;
    const start = ++this.at;
    for (;;) {
      const c = b[this.at];
      if (c === undefined || c === 92 || c < 32 || c > 126) return undefined;
      if (c === 34) break;
      this.at++;
    }
    const key = String.fromCharCode.apply(null, b.subarray(start, this.at) as unknown as number[]);
    this.at++;
    return key;
  }

  /** Nested arrays of numbers at `depth`, elements appended to `values`; false when it gives up. */
  array(depth: number): boolean {
    if (depth >= MAX_DEPTH) return false;
    this.at++;
    let c = this.space();
    let n: number;
    if (c === 91) {
      n = 0;
      for (;;) {
        if (!this.array(depth + 1)) return false;
        n++;
        c = this.space();
        if (c === 93) break;
        if (c !== 44) return false;
        this.at++;
        if (this.space() !== 91) return false;
      }
      this.at++;
    } else {
      // A row of numbers: every row sits at the same depth, or the arrays are ragged.
      if (this.leafDepth === -1) this.leafDepth = depth + 1;
      else if (this.leafDepth !== depth + 1) return false;
      n = this.row();
      if (n < 0) return false;
    }
    const seen = this.shape[depth];
    if (seen === undefined) this.shape[depth] = n;
    else if (seen !== n) return false;
    return true;
  }

  /**
   * The numbers of a row up to its closing bracket, appended to `values`: how many, or -1 when
   * one of them is not a JSON number (or the row is empty). All in one loop, with the position in
   * a local: this is nearly all of the reading.
   */
  row(): number {
    const b = this.bytes;
    let at = this.at;
    let count = this.count;
    let out = values;
    const first = count;
    // Magnitudes from here on overflow the input's type: JSON.parse and its caller refuse them.
    const bound = this.float32 ? FLOAT32_OVERFLOW : Infinity;
    const room = this.maxElements - this.total;
    for (;;) {
      const start = at;
      let c = b[at]!;
      const negative = c === 45;
      if (negative) c = b[++at]!;
      // The first MAX_DIGITS significant digits, exactly; the power of ten they stand for; and
      // whether a digit past them was not zero.
      let mantissa = 0;
      let digits = 0;
      let exponent = 0;
      let dropped = false;
      if (c === 48) {
        c = b[++at]!;
        if (c >= 48 && c <= 57) return -1;
      } else if (c >= 49 && c <= 57) {
        do {
          if (digits < MAX_DIGITS) {
            mantissa = mantissa * 10 + (c - 48);
            digits++;
          } else {
            exponent++;
            dropped ||= c !== 48;
          }
          c = b[++at]!;
        } while (c >= 48 && c <= 57);
      } else return -1;
      if (c === 46) {
        c = b[++at]!;
        if (!(c >= 48 && c <= 57)) return -1;
        do {
          if (digits < MAX_DIGITS) {
            // Leading zeros of a fraction (0.001) add no digit, only a power of ten.
            if (digits > 0 || c !== 48) {
              mantissa = mantissa * 10 + (c - 48);
              digits++;
            }
            exponent--;
          } else dropped ||= c !== 48;
          c = b[++at]!;
        } while (c >= 48 && c <= 57);
      }
      if (c === 101 || c === 69) {
        c = b[++at]!;
        const minus = c === 45;
        if (minus || c === 43) c = b[++at]!;
        if (!(c >= 48 && c <= 57)) return -1;
        let e = 0;
        do {
          if (e < 100_000) e = e * 10 + (c - 48);
          c = b[++at]!;
        } while (c >= 48 && c <= 57);
        exponent += minus ? -e : e;
      }
      let v = exponent >= -22 && exponent <= 22 ? (exponent >= 0 ? mantissa * EXACT[exponent]! : mantissa / EXACT[-exponent]!) : NaN;
      // v is JSON.parse's number when nothing was dropped; with digits dropped it is within 1e-14
      // of it, which settles the float32 it rounds to unless that is close to halfway between two.
      if (v !== v || (dropped && !(this.float32 && sameFloat32(v)))) {
        v = Number(String.fromCharCode.apply(null, b.subarray(negative ? start + 1 : start, at) as unknown as number[]));
      }
      if (!(v < bound)) return -1;
      if (count === room) throw new ValidationError(`the request holds more than ${this.maxElements} tensor elements, the server's limit (--max-tensor-elements)`);
      if (count === out.length) {
        values = new Float64Array(out.length * 2);
        values.set(out);
        out = values;
      }
      out[count++] = negative ? -v : v;
      while (c === 32 || c === 10 || c === 13 || c === 9) c = b[++at]!;
      if (c === 44) {
        c = b[++at]!;
        while (c === 32 || c === 10 || c === 13 || c === 9) c = b[++at]!;
        continue;
      }
      if (c !== 93) return -1;
      this.at = at + 1;
      this.count = count;
      return count - first;
    }
  }
}

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);
// Relative distance from an approximation to the number it stands for, with room to spare: digits
// dropped after the fifteenth (< 1e-14), JSON.parse's own rounding (1.1e-16), and v's (1.1e-16).
const BAND = 1e-12;

/**
 * True when every number within BAND of `v` (positive) rounds to the same float32 as `v`: then a
 * number read to within BAND, and the double JSON.parse makes of it, are the same float32.
 */
function sameFloat32(v: number): boolean {
  // Normal float32 numbers only: near the edges of the range the spacing changes.
  if (!(v >= 1.2e-38 && v <= 3.4e38)) return false;
  f32[0] = v;
  const f = f32[0]!;
  const bits = f32Bits[0]!;
  f32Bits[0] = bits + 1;
  const up = f32[0]!;
  f32Bits[0] = bits - 1;
  const down = f32[0]!;
  // Halfway to each neighbour: exact doubles, the edges of what rounds to f.
  return v * (1 - BAND) > (f + down) / 2 && v * (1 + BAND) < (f + up) / 2;
}

/**
 * The tensors of a JSON body whose every field is a float input given as nested arrays, each as
 * `{ data, shape }` with `data` a typed array of the input's type; undefined when the body is
 * anything else (read it with `JSON.parse` then). Throws a {@link ValidationError} as soon as
 * the fields hold more than `maxElements` numbers together.
 */
export function readFloatTensors(bytes: Uint8Array, inputs: FloatInputs, maxElements = Infinity): Record<string, Pick<TensorValue, "data" | "shape">> | undefined {
  try {
    return read(bytes, inputs, maxElements);
  } finally {
    if (values.length > KEEP) values = new Float64Array(INITIAL);
  }
}

function read(bytes: Uint8Array, inputs: FloatInputs, maxElements: number): Record<string, Pick<TensorValue, "data" | "shape">> | undefined {
  const r = new Reader(bytes, maxElements);
  if (r.space() !== 123) return undefined;
  r.at++;
  const out: Record<string, Pick<TensorValue, "data" | "shape">> = {};
  for (;;) {
    if (r.space() !== 34) return undefined;
    const name = r.key();
    const type = name === undefined ? undefined : inputs.get(name);
    if (type === undefined || name === "__proto__" || Object.hasOwn(out, name!)) return undefined;
    if (r.space() !== 58) return undefined;
    r.at++;
    if (r.space() !== 91) return undefined;
    r.count = 0;
    r.shape = [];
    r.leafDepth = -1;
    r.float32 = type === "float32";
    if (!r.array(0) || r.shape.length !== r.leafDepth) return undefined;
    const data = type === "float32" ? new Float32Array(r.count) : new Float64Array(r.count);
    data.set(values.subarray(0, r.count));
    out[name!] = { data, shape: r.shape };
    r.total += r.count;
    const c = r.space();
    r.at++;
    if (c === 125) break;
    if (c !== 44) return undefined;
  }
  return r.space() === undefined ? out : undefined;
}
