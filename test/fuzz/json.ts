/**
 * JSON bodies for the fuzz: random values of random shape and depth, values near a route's
 * expected input with parts swapped for others, and texts that are not quite JSON. Values are
 * written by a serializer of our own, so that a body can hold what JavaScript values cannot:
 * numbers such as 1e400 or 30 digits, duplicate keys, lone surrogates, odd spacing.
 */
import type { Random } from "./random.js";

/** A number written exactly as its text (1e400, -0, 123456789012345678901234567890). */
export class RawNumber {
  constructor(readonly text: string) {}
}

/** A JSON value, with numbers that may be written as raw text. */
export type Json = null | boolean | number | string | RawNumber | Json[] | { [key: string]: Json };

const utf8 = new TextEncoder();

/** Numbers a parser or a model may trip on. */
export const ODD_NUMBERS: readonly string[] = [
  "1e400", "-1e400", "1e-400", "-0", "0.0", "1E+2", "9007199254740993", "-9007199254740993",
  "123456789012345678901234567890", "1.7976931348623157e308", "5e-324", "0.1", "-1", "2147483648",
  "4294967296", "1e21", "0e0", "3.4028235e38", "65504", "1e-7",
];

/** Strings that look like numbers, or that stress a decoder. */
export const ODD_STRINGS: readonly string[] = [
  "NaN", "nan", "Infinity", "-Infinity", "inf", "-inf", "+inf", "1e400", "", " ", "0", "true", "null",
  "\u0000", "\ud800", "\udfff", "\u2028", "\ufeff", "é", "日本語", "😀", "%00", "%E0%A4%A", "../..", "/",
  "__proto__", "constructor", "a".repeat(300),
];

/** Keys that collide with properties every object has. */
export const ODD_KEYS: readonly string[] = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf", "", "0", "length", "then"];

/** A random JSON value; `depth` bounds the nesting. */
export function randomJson(r: Random, depth = r.skewed(0, 6)): Json {
  const leaf = depth <= 0 || r.chance(0.35);
  if (leaf) {
    switch (r.int(0, 7)) {
      case 0:
        return null;
      case 1:
        return r.chance(0.5);
      case 2:
        return r.int(-1000, 1000);
      case 3:
        return (r.next() - 0.5) * 10 ** r.int(-10, 30);
      case 4:
        return new RawNumber(r.pick(ODD_NUMBERS));
      case 5:
        return r.pick(ODD_STRINGS);
      case 6:
        return r.string(r.skewed(0, 40), "abcxyz ABC019-_./\\\"'\n\t");
      default:
        return String.fromCodePoint(...Array.from({ length: r.skewed(0, 8) }, () => r.int(0, 0x10ffff)).map((c) => (c >= 0xd800 && c <= 0xdfff ? 0x41 : c)));
    }
  }
  if (r.chance(0.5)) return Array.from({ length: r.skewed(0, 12) }, () => randomJson(r, depth - 1));
  const out: { [key: string]: Json } = {};
  const keys = r.skewed(0, 10);
  for (let i = 0; i < keys; i++) setKey(out, r.chance(0.2) ? r.pick(ODD_KEYS) : r.string(r.int(1, 8), "abcdexyz_"), randomJson(r, depth - 1));
  return out;
}

// An own key even when it is `__proto__`, which plain assignment would take as the prototype.
function setKey(out: { [key: string]: Json }, key: string, value: Json): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Replaces random parts of `value` (a route's expected input, say) with other values or nothing. */
export function perturb(r: Random, value: Json, rate = 0.15): Json {
  if (r.chance(rate)) return randomJson(r, 2);
  if (Array.isArray(value)) {
    const out = value.map((v) => perturb(r, v, rate));
    if (r.chance(rate)) out.push(randomJson(r, 1));
    if (r.chance(rate) && out.length > 0) out.splice(r.int(0, out.length - 1), 1);
    return out;
  }
  if (value !== null && typeof value === "object" && !(value instanceof RawNumber)) {
    const out: { [key: string]: Json } = {};
    for (const [k, v] of Object.entries(value)) if (!r.chance(rate / 2)) setKey(out, k, perturb(r, v, rate));
    if (r.chance(rate)) setKey(out, r.pick(ODD_KEYS), randomJson(r, 1));
    return out;
  }
  if (typeof value === "number" && r.chance(rate)) return new RawNumber(r.pick(ODD_NUMBERS));
  return value;
}

/**
 * Writes `value` as JSON text, now and then with what JSON.stringify never writes: a key twice,
 * `\u` escapes, whitespace of every allowed kind.
 */
export function writeJson(r: Random, value: Json): string {
  const space = () => (r.chance(0.05) ? r.pick([" ", "\n", "\t", "\r\n", "   "]) : "");
  const str = (s: string) => {
    const text = JSON.stringify(s);
    // A lone surrogate is kept as its escape; other characters are now and then escaped too.
    return r.chance(0.05) ? text.replace(/[a-z]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) : text;
  };
  const write = (v: Json): string => {
    if (v instanceof RawNumber) return v.text;
    if (v === null || typeof v === "boolean") return String(v);
    if (typeof v === "number") return Number.isFinite(v) ? String(v) : "null";
    if (typeof v === "string") return str(v);
    if (Array.isArray(v)) return `[${space()}${v.map(write).join(`,${space()}`)}${space()}]`;
    const entries = Object.entries(v).map(([k, x]) => `${str(k)}${space()}:${space()}${write(x)}`);
    // A key given twice: parsers keep the last one, or the first, or fail.
    if (entries.length > 0 && r.chance(0.05)) entries.push(`${str(Object.keys(v)[0]!)}:${write(randomJson(r, 1))}`);
    return `{${space()}${entries.join(",")}${space()}}`;
  };
  return write(value);
}

/** Nesting far deeper than any input needs: arrays, objects, or both, thousands of levels. */
export function deepJson(r: Random): string {
  const levels = r.pick([500, 5_000, 50_000, 200_000]);
  switch (r.int(0, 2)) {
    case 0:
      return "[".repeat(levels) + "]".repeat(levels);
    case 1:
      return '{"a":'.repeat(levels) + "1" + "}".repeat(levels);
    default:
      return '[{"a":'.repeat(levels / 2) + "null" + "}]".repeat(levels / 2);
  }
}

/** Texts that are almost JSON, as bytes (some are not UTF-8). */
export function brokenJson(r: Random, text: string): Uint8Array {
  switch (r.int(0, 9)) {
    case 0:
      return utf8.encode(text.slice(0, r.int(0, Math.max(0, text.length - 1))));
    case 1:
      return utf8.encode(`\ufeff${text}`);
    case 2:
      return utf8.encode(`${text},`);
    case 3:
      return utf8.encode(text.replace(/"/g, "'"));
    case 4:
      return utf8.encode(`/* c */${text}`);
    case 5:
      return utf8.encode(r.pick(["NaN", "Infinity", "-Infinity", "undefined", "{a:1}", "[1,]", "{\"a\":1,}", "\"\\x41\"", "\"\\u12\"", "01", "+1", ".5", "1.", "[1 2]", "{\"a\" 1}"]));
    case 6: {
      const bytes = utf8.encode(text);
      const at = r.int(0, bytes.length);
      const bad = r.pick([[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe0, 0xa4], [0x80], [0xf4, 0x90, 0x80, 0x80]]);
      return Uint8Array.from([...bytes.subarray(0, at), ...bad, ...bytes.subarray(at)]);
    }
    case 7:
      return utf8.encode(`${text}${text}`);
    case 8:
      return utf8.encode(`${text}\u0000`);
    default:
      return utf8.encode(text.replace(/[:,]/, ""));
  }
}
