/**
 * Writes tensors as JSON text, straight into bytes: `{"name": [[...], ...], ...}` with nested
 * arrays as the shape gives them. A thousand floats through `JSON.stringify` cost more than the
 * HTTP exchange that carries them (each element becomes a JS number, then V8 writes its shortest
 * double, usually 17 digits). Here each element goes from the typed array to digits directly, and
 * a float32 gets the fewest digits that read back as the same float32 (`0.1`, not
 * `0.10000000149011612`): half the bytes, and exactly the value the model gave.
 *
 * Numbers follow JavaScript's own layout (`0.000123`, `1.5e-7`, `1e+21`); NaN and ±Infinity are
 * `null`, as `JSON.stringify` writes them; 64-bit integers are written as JSON numbers, like the
 * nested arrays before them (exact up to 2^53).
 */
import { type TensorValue } from "./tensor.js";

const utf8 = new TextEncoder();

// Powers of ten that doubles hold exactly: scaling by one of them is a single rounding.
export const EXACT = Array.from({ length: 23 }, (_, i) => 10 ** i);
// Two ASCII digits for each of 0..99, so that digits are cut two at a time.
const PAIRS = new Uint8Array(200);
for (let i = 0; i < 100; i++) {
  PAIRS[2 * i] = 48 + Math.floor(i / 10);
  PAIRS[2 * i + 1] = 48 + (i % 10);
}
// Whole numbers below this fit V8's 32-bit integer arithmetic.
const INT32 = 2 ** 31;
const bits = new Uint32Array(1);
const asFloat32 = new Float32Array(bits.buffer);

/** `x * 10^k` with one rounding, for |k| <= 22. */
function scale(x: number, k: number): number {
  return k >= 0 ? x * EXACT[k]! : x / EXACT[-k]!;
}

const INITIAL_BYTES = 64 * 1024;
const KEPT_BYTES = 1024 * 1024;

/** A growing byte buffer, reused by every answer a thread writes. */
class Bytes {
  buf = new Uint8Array(INITIAL_BYTES);
  at = 0;

  /** Makes room for `n` more bytes. */
  room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
  }

  ascii(text: string): void {
    this.room(text.length);
    for (let i = 0; i < text.length; i++) this.buf[this.at++] = text.charCodeAt(i);
  }

  /** Any text, as UTF-8. */
  text(text: string): void {
    this.room(text.length * 3);
    this.at += utf8.encodeInto(text, this.buf.subarray(this.at)).written;
  }

  /** Writes the `n` digits of the whole number `m` so that they end just before `end`. */
  digits(m: number, n: number, end: number): void {
    const buf = this.buf;
    if (m < INT32) {
      // The same with integer division: every float32's digits take this way. A loop of its own, as
      // one loop for both kinds of number lost the gain (56 against 43 µs per 1,000 float32).
      while (n >= 2) {
        const q = (m / 100) | 0;
        const r = (m - q * 100) << 1;
        m = q;
        n -= 2;
        buf[--end] = PAIRS[r + 1]!;
        buf[--end] = PAIRS[r]!;
      }
      if (n === 1) buf[--end] = 48 + m;
      return;
    }
    while (n >= 2) {
      const q = Math.floor(m / 100);
      const r = m - q * 100;
      m = q;
      n -= 2;
      buf[--end] = PAIRS[2 * r + 1]!;
      buf[--end] = PAIRS[2 * r]!;
    }
    if (n === 1) buf[--end] = 48 + m;
  }

  /** A whole number (at most 2^53 in size). Needs 17 bytes of room. */
  integer(v: number): void {
    if (v < 0) {
      this.buf[this.at++] = 45;
      v = -v;
    }
    let n = 1;
    while (n < 16 && v >= EXACT[n]!) n++;
    this.digits(v, n, (this.at += n));
  }

  /**
   * A float32 in the fewest significant digits that read back as the same float32. Needs 16 bytes
   * of room.
   */
  float32(v: number): void {
    const buf = this.buf;
    if (v === 0) {
      buf[this.at++] = 48;
      return;
    }
    if (v - v !== 0) {
      this.ascii("null");
      return;
    }
    if (v < 0) {
      buf[this.at++] = 45;
      v = -v;
    }
    if (findDigits(v)) this.#layout(found.digits, found.count, found.exponent);
    else this.ascii(String(shortestByPrecision(v)));
  }

  // Places the n digits of m, whose first digit stands for 10^e, as JavaScript would.
  #layout(m: number, n: number, e: number): void {
    const buf = this.buf;
    if (e >= 0 && e < 21) {
      if (n <= e + 1) {
        this.digits(m, n, (this.at += n));
        for (let i = n; i <= e; i++) buf[this.at++] = 48;
      } else {
        const fraction = n - e - 1;
        const cut = EXACT[fraction]!;
        const whole = Math.floor(m / cut);
        this.digits(whole, e + 1, (this.at += e + 1));
        buf[this.at++] = 46;
        this.digits(m - whole * cut, fraction, (this.at += fraction));
      }
    } else if (e < 0 && e > -7) {
      buf[this.at++] = 48;
      buf[this.at++] = 46;
      for (let i = -1; i > e; i--) buf[this.at++] = 48;
      this.digits(m, n, (this.at += n));
    } else {
      const cut = EXACT[n - 1]!;
      const first = Math.floor(m / cut);
      buf[this.at++] = 48 + first;
      if (n > 1) {
        buf[this.at++] = 46;
        this.digits(m - first * cut, n - 1, (this.at += n - 1));
      }
      buf[this.at++] = 101;
      buf[this.at++] = e < 0 ? 45 : 43;
      this.integer(Math.abs(e));
    }
  }

  /** The bytes written, in a buffer of their own. */
  take(): Uint8Array {
    const out = this.buf.slice(0, this.at);
    this.at = 0;
    // A buffer grown for a large answer is not kept for the small ones after it.
    if (this.buf.length > KEPT_BYTES) this.buf = new Uint8Array(INITIAL_BYTES);
    return out;
  }
}

/** What findDigits found: the float32 is `digits × 10^(exponent - count + 1)`, read back. */
const found = { digits: 0, count: 0, exponent: 0 };

/**
 * Finds the fewest significant digits that read back as the float32 `v` (finite, positive) into
 * `found`. False when `v` is subnormal or far from 1 (below 1e-13 or from 1e20 on): there the powers
 * of ten are not exact doubles, and shortestByPrecision serves.
 */
function findDigits(v: number): boolean {
  // The decimal exponent: floor(log10(2^e2)) is it, or one less.
  asFloat32[0] = v;
  const e2 = (bits[0]! >>> 23) - 127;
  let e = Math.floor(e2 * 0.3010299956639812);
  if (e < -13 || e > 19 || e2 === -127) return false;
  // Nine significant digits always read back as the same float32; then fewer while they do.
  let m = Math.round(scale(v, 8 - e));
  if (m >= 1e9) m = Math.round(scale(v, 8 - ++e));
  let n = 9;
  while (n > 1) {
    const k = n - 2 - e;
    const shorter = Math.round(scale(v, k));
    if (Math.fround(scale(shorter, -k)) !== v) break;
    m = shorter;
    n--;
    // Rounding carried into a new digit (9.9999999 -> 10.000000): one more power of ten.
    if (m >= EXACT[n]!) {
      m /= 10;
      e++;
    }
  }
  while (n > 1 && m % 10 === 0) {
    m /= 10;
    n--;
  }
  found.digits = m;
  found.count = n;
  found.exponent = e;
  return true;
}

/**
 * The decimal with the fewest significant digits, from `from` up to `to` (which must always read
 * back), that `round` maps back to `value`: for a float32 by default, for a half float with its
 * own rounding. The slow way, one `toPrecision` per count.
 */
export function shortestByPrecision(value: number, round: (x: number) => number = Math.fround, from = 1, to = 9): number {
  for (let digits = from; digits < to; digits++) {
    const x = Number(value.toPrecision(digits));
    if (round(x) === value) return x;
  }
  return Number(value.toPrecision(to));
}

/**
 * The number with the fewest significant digits that reads back as the float32 `v`: 0.1 for
 * `Math.fround(0.1)`, which JavaScript would print as 0.10000000149011612. For JSON written with
 * `JSON.stringify`; NaN and ±Infinity are returned as they are.
 */
export function shortestFloat32(v: number): number {
  if (v === 0 || v - v !== 0) return v;
  const a = Math.abs(v);
  let x: number;
  if (findDigits(a)) {
    // One rounding from the exact decimal, as a JSON reader's: JavaScript prints back its digits.
    const k = found.exponent - found.count + 1;
    x = scale(found.digits, k);
  } else x = shortestByPrecision(a);
  return v < 0 ? -x : x;
}

const out = new Bytes();

// The largest text of one element of each type: "-1.23456789e-13" for float32, JavaScript's
// longest double, a 20-digit integer.
const WIDTH: Record<TensorValue["type"], number> = {
  float32: 16,
  float64: 25,
  int8: 4,
  uint8: 3,
  int16: 6,
  uint16: 5,
  int32: 11,
  uint32: 10,
  int64: 24,
  uint64: 24,
  bool: 5,
};

// Writes `count` elements from `from`, comma-separated: one loop per kind of element.
function elements(tensor: TensorValue, from: number, count: number): void {
  const { type, data } = tensor;
  out.room(count * (WIDTH[type] + 1));
  const end = from + count;
  if (type === "float32") {
    const floats = data as Float32Array;
    for (let i = from; i < end; i++) {
      if (i > from) out.buf[out.at++] = 44;
      out.float32(floats[i]!);
    }
    return;
  }
  for (let i = from; i < end; i++) {
    if (i > from) out.buf[out.at++] = 44;
    const v = data[i]!;
    if (type === "bool") out.ascii(v === 0 ? "false" : "true");
    else if (typeof v === "bigint") out.ascii(String(Number(v)));
    else if (type === "float64") out.ascii(v - v === 0 ? String(v) : "null");
    else out.integer(v);
  }
}

// Writes the elements from `from` as nested arrays of shape[depth..]; returns the next element.
function nested(tensor: TensorValue, depth: number, from: number): number {
  const { shape } = tensor;
  if (depth === shape.length) {
    elements(tensor, from, 1);
    return from + 1;
  }
  out.ascii("[");
  const rows = shape[depth]!;
  if (depth === shape.length - 1) {
    elements(tensor, from, rows);
    from += rows;
  } else {
    for (let i = 0; i < rows; i++) {
      if (i > 0) out.ascii(",");
      from = nested(tensor, depth + 1, from);
    }
  }
  out.ascii("]");
  return from;
}

/** Named tensors as one JSON object, one field of nested arrays per tensor, as UTF-8 bytes. */
export function tensorsToJson(tensors: Readonly<Record<string, TensorValue>>): Uint8Array {
  out.at = 0;
  out.ascii("{");
  let first = true;
  for (const [name, tensor] of Object.entries(tensors)) {
    if (!first) out.ascii(",");
    first = false;
    out.text(JSON.stringify(name));
    out.ascii(":");
    nested(tensor, 0, 0);
  }
  out.ascii("}");
  return out.take();
}
