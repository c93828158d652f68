import { Packr } from "msgpackr";

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

/** MessagePack in and out (`application/msgpack`). */
export const msgpack: Codec = {
  contentType: "application/msgpack",
  decode: (body) => packr.unpack(body),
  encode: (value) => packr.pack(value),
};

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
