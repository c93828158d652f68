/**
 * MessagePack bodies for the fuzz: values msgpackr writes (maps, sets, dates, typed arrays,
 * big integers), extension frames of every type with random payloads (msgpackr's own types
 * among them: structured-clone ids and pointers, typed arrays, bundled strings, errors), headers
 * that promise more than the body holds, and bytes cut or flipped.
 */
import { Packr } from "msgpackr";
import { randomJson, type Json, RawNumber } from "./json.js";
import type { Random } from "./random.js";

const plain = new Packr({ useRecords: false, mapsAsObjects: true });
// Writes references when a value is met twice, as a client with structured clone on would.
const cloning = new Packr({ useRecords: false, structuredClone: true, moreTypes: true });

// Extension types msgpackr reads itself: undefined, BigInt, Error, id and pointer (structured
// clone), Set, typed array, RegExp, bundled strings; and -1, the timestamp of the spec.
const KNOWN_EXT = [0x00, 0x42, 0x65, 0x69, 0x70, 0x73, 0x74, 0x78, 0x62, -1];

/** A random value as msgpackr can write it: JSON's kinds and more. */
function randomValue(r: Random, depth: number): unknown {
  if (depth <= 0 || r.chance(0.4)) {
    switch (r.int(0, 9)) {
      case 0:
        return undefined;
      case 1:
        return BigInt(r.int(-1000, 1000)) * 10n ** BigInt(r.int(0, 30));
      case 2:
        return new Date(r.chance(0.1) ? NaN : r.int(-1e12, 4e12));
      case 3:
        return r.bytes(r.skewed(0, 64));
      case 4:
        return new Float32Array(r.skewed(0, 16)).map(() => r.next() * 100);
      case 5:
        return new BigInt64Array(r.skewed(0, 4)).map(() => BigInt(r.int(-5, 5)));
      case 6:
        return r.pick([NaN, Infinity, -Infinity, -0, 2 ** 64, Number.MIN_VALUE]);
      default:
        return toValue(randomJson(r, 0));
    }
  }
  switch (r.int(0, 3)) {
    case 0:
      return new Map(Array.from({ length: r.skewed(0, 6) }, () => [randomValue(r, 0), randomValue(r, depth - 1)] as const));
    case 1:
      return new Set(Array.from({ length: r.skewed(0, 6) }, () => randomValue(r, depth - 1)));
    case 2:
      return Array.from({ length: r.skewed(0, 8) }, () => randomValue(r, depth - 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = r.skewed(0, 6); i > 0; i--) out[r.string(r.int(1, 6), "abcxyz")] = randomValue(r, depth - 1);
      return out;
    }
  }
}

// A JSON value as a plain value for msgpackr (raw numbers become numbers, or text).
function toValue(value: Json): unknown {
  if (value instanceof RawNumber) return Number.isFinite(Number(value.text)) ? Number(value.text) : value.text;
  if (Array.isArray(value)) return value.map(toValue);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toValue(v)]));
  return value;
}

/** An extension frame of `type` around `data`, in the smallest form that fits; its header may declare another length. */
function extFrame(type: number, data: Uint8Array, declared = data.length): Uint8Array {
  const t = type & 0xff;
  const fixed: Record<number, number> = { 1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8 };
  if (declared === data.length && fixed[data.length] !== undefined) return Uint8Array.from([fixed[data.length]!, t, ...data]);
  if (declared < 0x100) return Uint8Array.from([0xc7, declared, t, ...data]);
  if (declared < 0x10000) return Uint8Array.from([0xc8, declared >> 8, declared & 0xff, t, ...data]);
  return Uint8Array.from([0xc9, (declared >>> 24) & 0xff, (declared >>> 16) & 0xff, (declared >>> 8) & 0xff, declared & 0xff, t, ...data]);
}

/** A header that promises `count` elements or bytes: array, map, string or binary, 32-bit form. */
function lyingHeader(r: Random): Uint8Array {
  const count = r.pick([0xffffffff, 0x7fffffff, 1 << 24, 1000]);
  const head = r.pick([0xdd, 0xdf, 0xdb, 0xc6]);
  return Uint8Array.from([head, (count >>> 24) & 0xff, (count >>> 16) & 0xff, (count >>> 8) & 0xff, count & 0xff, ...r.bytes(r.int(0, 8))]);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A MessagePack body; `near` is the input the route expects, when it has one. */
export function msgpackBody(r: Random, near?: unknown): Uint8Array {
  const value = near !== undefined && r.chance(0.5) ? near : randomValue(r, r.skewed(0, 5));
  let body: Uint8Array;
  try {
    body = r.chance(0.1) ? cloning.pack(r.chance(0.5) ? [value, value, { again: value }] : value) : plain.pack(value);
  } catch {
    body = plain.pack(null);
  }
  switch (r.weighted<number>([[5, 0], [2, 1], [2, 2], [1, 3], [1, 4], [1, 5]])) {
    case 0:
      return body;
    case 1: {
      // An extension frame where a value goes: alone, or as an element of an array.
      const type = r.chance(0.6) ? r.pick(KNOWN_EXT) : r.int(-128, 127);
      const data = r.chance(0.5) ? r.bytes(r.pick([0, 1, 2, 4, 8, 16, r.int(0, 300)])) : body.subarray(0, r.int(0, body.length));
      const declared = r.chance(0.2) ? r.pick([data.length + 1, 0xffff, 0xffffffff]) : data.length;
      const frame = extFrame(type, data, declared);
      return r.chance(0.5) ? frame : concat([Uint8Array.of(0x92), frame, body]);
    }
    case 2:
      return lyingHeader(r);
    case 3:
      return body.subarray(0, r.int(0, Math.max(0, body.length - 1)));
    case 4: {
      const out = Uint8Array.from(body);
      for (let i = r.int(1, 4); i > 0 && out.length > 0; i--) out[r.int(0, out.length - 1)] = r.int(0, 255);
      return out;
    }
    default:
      return concat([body, r.bytes(r.int(1, 16))]);
  }
}
