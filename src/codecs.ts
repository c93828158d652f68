import { Packr, Unpackr } from "msgpackr";
import { ClientError, DecodingError } from "./errors.js";

/**
 * How the first stage of a route turns request bytes into `forward()`'s input, and how the last
 * stage turns `forward()`'s output into response bytes. Codecs run inside workers, never on the
 * HTTP thread.
 */
export interface Codec {
  /** The content-type of responses encoded by this codec. */
  readonly contentType: string;
  /** Request body to value. Throw a {@link DecodingError} (or anything: it becomes one) on bad input. */
  decode(body: Uint8Array): unknown;
  /** Value to response body. */
  encode(value: unknown): Uint8Array;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
// A byte-order mark is kept, as Buffer#toString keeps it: a body that starts with one is not JSON
// to JSON.parse, as it was not to these bodies' readers before they shared this one.
const lenientUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * A request body that must be JSON (a control request's, an API's own): its value, or a
 * {@link ClientError} (400) that says it is not JSON.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(lenientUtf8.decode(bytes));
  } catch (err) {
    throw new ClientError(`the body is not JSON: ${(err as Error).message}`);
  }
}

/** {@link parseJsonBody} of a body that must be a JSON object (an empty one is `{}` when `emptyIsObject`). */
export function parseJsonObject(bytes: Uint8Array, emptyIsObject = false): Record<string, unknown> {
  const value = emptyIsObject && bytes.byteLength === 0 ? {} : parseJsonBody(bytes);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ClientError("the body must be a JSON object");
  return value as Record<string, unknown>;
}
const utf8Encoder = new TextEncoder();

/** JSON in and out (the default). Responses are compact JSON. */
export const json: Codec = {
  contentType: "application/json",
  decode: (body) => JSON.parse(utf8.decode(body)),
  encode: (value) => {
    const text = JSON.stringify(value);
    // JSON.stringify returns undefined for undefined and functions: answer JSON null instead.
    return utf8Encoder.encode(text === undefined ? "null" : text);
  },
};

// One packer per thread; `useRecords: false` keeps the output plain msgpack that any client reads.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });
// Clients' bytes are read without msgpackr's own extensions. structuredClone: false makes its
// reference extensions throw; the others (records, sets, typed arrays, errors, bundled strings)
// it honours whatever the options say, so plainMessagePack() refuses them first.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, structuredClone: false });

/**
 * MessagePack in and out (`application/msgpack`). Requests are plain MessagePack: maps, arrays,
 * numbers, strings, bin and timestamps; any other extension type is a {@link DecodingError}.
 */
export const msgpack: Codec = {
  contentType: "application/msgpack",
  decode: (body) => unpackr.unpack(plainMessagePack(body)),
  encode: (value) => packr.pack(value),
};

// The one extension type the MessagePack specification defines: -1, a timestamp.
const TIMESTAMP = 0xff;

// For each token from 0xc4 to 0xdf: the bytes of its head; the bytes of the length its head ends
// with (what follows the head), or 0; the offset of its extension type, or 0.
const HEADS: readonly (readonly [head: number, length: 0 | 1 | 2 | 4, ext: number])[] = [
  [2, 1, 0], [3, 2, 0], [5, 4, 0], // bin 8, 16, 32
  [3, 1, 2], [4, 2, 3], [6, 4, 5], // ext 8, 16, 32
  [5, 0, 0], [9, 0, 0], // float 32, 64
  [2, 0, 0], [3, 0, 0], [5, 0, 0], [9, 0, 0], // uint 8, 16, 32, 64
  [2, 0, 0], [3, 0, 0], [5, 0, 0], [9, 0, 0], // int 8, 16, 32, 64
  [3, 0, 1], [4, 0, 1], [6, 0, 1], [10, 0, 1], [18, 0, 1], // fixext 1, 2, 4, 8, 16
  [2, 1, 0], [3, 2, 0], [5, 4, 0], // str 8, 16, 32
  [3, 0, 0], [5, 0, 0], [3, 0, 0], [5, 0, 0], // array 16, 32; map 16, 32
];

/**
 * Checks that `bytes` use no MessagePack extension but the timestamp, and returns them. Every
 * token is self-delimiting, so one pass over the tokens, skipping strings and bin, finds every
 * extension without building anything. An extension can make a few bytes decode into gigabytes
 * (a reference repeated a thousand times at each of three levels), or into objects no client
 * should make. Truncated input is left for the decoder to report.
 */
export function plainMessagePack(bytes: Uint8Array): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  let at = 0;
  while (at < end) {
    const token = bytes[at]!;
    // Fixed ints, fixmaps and fixarrays (their items follow as tokens), nil, false and true.
    if (token <= 0x9f || token >= 0xe0 || token === 0xc0 || token === 0xc2 || token === 0xc3) {
      at += 1;
      continue;
    }
    if (token <= 0xbf) {
      at += 1 + (token & 0x1f);
      continue;
    }
    const entry = HEADS[token - 0xc4];
    if (entry === undefined) throw new DecodingError(`the byte 0xc1 at ${at} is not MessagePack`);
    const [head, length, ext] = entry;
    if (at + head > end) break;
    if (ext > 0 && bytes[at + ext] !== TIMESTAMP) {
      const type = (bytes[at + ext]! << 24) >> 24;
      throw new DecodingError(`MessagePack extension type ${type} at byte ${at} is not accepted; send plain MessagePack (maps, arrays, numbers, strings, bin)`);
    }
    at += head + (length === 1 ? bytes[at + 1]! : length === 2 ? view.getUint16(at + 1) : length === 4 ? view.getUint32(at + 1) : 0);
  }
  return bytes;
}

/**
 * Raw bytes in and out: `forward()` receives the body as a `Uint8Array` and returns a
 * `Uint8Array` (or a string, sent as UTF-8).
 */
export const bytes: Codec = {
  contentType: "application/octet-stream",
  decode: (body) => body,
  encode: (value) => {
    if (value instanceof Uint8Array) return value;
    if (typeof value === "string") return utf8Encoder.encode(value);
    if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    if (value instanceof ArrayBuffer) return new Uint8Array(value);
    throw new TypeError(`the bytes codec encodes Uint8Array, ArrayBuffer or string, not ${typeof value}`);
  },
};

/** The built-in codecs, by name. */
export const codecs = { json, msgpack, bytes } as const;
