/**
 * Request paths for the fuzz: the server's own paths, spelt in every way a client (or an
 * attacker) may spell them: percent-escapes valid and malformed, overlong and surrogate UTF-8,
 * encoded slashes, `.` and `..` segments, doubled slashes, odd names, very long segments,
 * query strings, and (on connections of their own) raw bytes beyond ASCII.
 */
import type { Random } from "./random.js";

/** Escapes that are not valid UTF-8 or not valid percent-encoding at all. */
export const BAD_ESCAPES: readonly string[] = ["%", "%4", "%G0", "%zz", "%E0%A4%A", "%C0%AF", "%C0%80", "%ED%A0%80", "%FF", "%F4%90%80%80", "%E2%82", "%%", "%u0041"];

/** Escapes that decode to something a router must not take as a separator or a parent. */
export const TRICKY_ESCAPES: readonly string[] = ["%2F", "%2f", "%2E", "%2e%2e", "%00", "%25", "%20", "%0A", "%3F", "%23", "%5C"];

/** Model names: the repository's, their spellings, and names that collide with object properties. */
export const MODEL_NAMES: readonly string[] = [
  "mlp", "mlp", "mlp", "upper", "upper", "MLP", "nope", "__proto__", "constructor", "toString", "hasOwnProperty",
  "..", ".", "mlp ", " mlp", "mlp.onnx", "a".repeat(300), "mlp\u00e9", "日本", "😀", "mlp\u0000", "%", "1",
];

export const VERSIONS: readonly string[] = ["1", "2", "1", "2", "3", "0", "01", "-1", "1.0", "1e0", "__proto__", "99999999999999999999", "..", "v1"];

const V2_ACTIONS = ["", "ready", "infer", "config", "stats", "load", "unload", "metadata", "INFER", "infer_stream", "generate", "generate_stream"];

/**
 * A segment written for a path: its characters kept, escaped, or mixed with malformed escapes.
 * `raw` allows bytes beyond ASCII (the path then goes on a raw connection).
 */
export function spell(r: Random, segment: string, raw: boolean): string {
  const mode = r.weighted<string>([[10, "plain"], [3, "escape-some"], [1, "escape-all"], [2, "bad"], [1, "tricky"], [raw ? 1 : 0, "raw"]]);
  const safe = encodeURIComponent(segment);
  switch (mode) {
    case "escape-some":
      return [...segment].map((c) => (r.chance(0.4) ? escapeChar(r, c) : encodeURIComponent(c))).join("");
    case "escape-all":
      return [...segment].map((c) => escapeChar(r, c)).join("");
    case "bad": {
      const at = r.int(0, safe.length);
      return safe.slice(0, at) + r.pick(BAD_ESCAPES) + safe.slice(at);
    }
    case "tricky": {
      const at = r.int(0, safe.length);
      return safe.slice(0, at) + r.pick(TRICKY_ESCAPES) + safe.slice(at);
    }
    case "raw":
      return segment + r.pick(["é", "日本", "😀", "\u00ff", "\u0085"]);
    default:
      return safe;
  }
}

// Every UTF-8 byte of `c` as an escape, in upper or lower case hex.
function escapeChar(r: Random, c: string): string {
  const upper = r.chance(0.5);
  return [...new TextEncoder().encode(c)].map((b) => `%${upper ? b.toString(16).toUpperCase().padStart(2, "0") : b.toString(16).padStart(2, "0")}`).join("");
}

/**
 * Joins segments into a path, now and then with a doubled slash, a `.` or `..` segment, a
 * trailing slash, a query string or a very long segment.
 */
export function joinPath(r: Random, segments: readonly string[]): string {
  const parts = [...segments];
  if (r.chance(0.04)) parts.splice(r.int(0, parts.length), 0, r.pick([".", "..", "", "%2e%2e", ".%2e"]));
  if (r.chance(0.02)) parts.splice(r.int(0, parts.length), 0, "x".repeat(r.pick([1000, 8000, 20_000])));
  let path = `/${parts.join("/")}`;
  if (r.chance(0.03)) path = path.replace("/", "//");
  if (r.chance(0.03)) path += "/";
  if (r.chance(0.05)) path += r.pick(["?", "?a=1", "?a=%zz&&b", "?x=" + "y".repeat(500), "?%E0%A4%A", "?binary_data_output=true"]);
  return path;
}

/** A V2 model path: `/v2/models/{m}[/versions/{v}][/{action}]`, spelt at random. */
export function modelPath(r: Random, raw: boolean, action = r.pick(V2_ACTIONS)): string {
  const segments = ["v2", "models", spell(r, r.pick(MODEL_NAMES), raw)];
  if (r.chance(0.4)) segments.push("versions", spell(r, r.pick(VERSIONS), raw));
  if (action !== "") segments.push(spell(r, action, raw));
  return joinPath(r, segments);
}

/** A path the server has: built-in, stage route, or V2; or one near them. */
export function anyPath(r: Random, raw: boolean, known: readonly string[]): string {
  if (r.chance(0.3)) return modelPath(r, raw);
  if (r.chance(0.2)) return joinPath(r, ["v2", "repository", "models", spell(r, r.pick(MODEL_NAMES), raw), r.pick(["load", "unload", "index"])]);
  const base = r.pick(known);
  if (r.chance(0.5)) return base;
  return joinPath(r, base.split("/").filter((s) => s.length > 0).map((s) => spell(r, s, raw)));
}
