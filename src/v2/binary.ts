/**
 * The binary tensor data extension: a body is a JSON header, then the bytes of each binary
 * tensor, in the order the tensors appear in the header; `Inference-Header-Content-Length` gives
 * the header's length. Elements are little-endian, row-major, without padding; a BOOL is one byte
 * (0 or 1); a BYTES element is its length as a 4-byte little-endian unsigned integer, then its
 * bytes.
 */
import { ClientError } from "../errors.js";
import { bytesOf, fromBytes } from "../tensor/bytes.js";
import { isNumeric, typedArrayFor, type TypedArray, type V2Datatype } from "../tensor/datatypes.js";
import { elementCount, formatShape } from "../tensor/shape.js";
import { describe } from "./json-data.js";
import type { V2Body, V2Pieces } from "./types.js";

const HEADER = "Inference-Header-Content-Length";
/** The header that says where a binary V2 body's JSON header ends, as Node names headers. */
export const HEADER_LENGTH = "inference-header-content-length";
const utf8 = new TextDecoder("utf-8", { fatal: true });
const utf8Encoder = new TextEncoder();

/**
 * The binary data after a body's JSON header, handed out tensor by tensor in header order.
 * Without the header length there is none, and asking for some is the client's error.
 */
export class BinaryTail {
  readonly #bytes: Uint8Array | readonly Uint8Array[] | undefined;
  readonly #kind: string;
  #at = 0;

  /**
   * `bytes`: what follows the JSON header, undefined when the body had no header length; or the
   * pieces of a {@link V2Pieces}, one per tensor.
   */
  constructor(bytes: Uint8Array | readonly Uint8Array[] | undefined, kind: "request" | "response") {
    this.#bytes = bytes;
    this.#kind = kind;
  }

  /** The next `size` bytes, for the tensor `where` whose `binary_data_size` is `size`. */
  take(where: string, size: unknown): Uint8Array {
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
      throw new ClientError(`${where}: parameters.binary_data_size must be a whole number of bytes; got ${describe(size)}`);
    }
    if (this.#bytes === undefined) throw new ClientError(`${where} has parameters.binary_data_size but the ${this.#kind} has no ${HEADER} header`);
    if (Array.isArray(this.#bytes)) {
      const piece = (this.#bytes as readonly Uint8Array[])[this.#at];
      if (piece?.byteLength !== size) throw new ClientError(`${where}: binary_data_size is ${size} but its binary data is ${piece === undefined ? "missing" : `${piece.byteLength} bytes`}`);
      this.#at++;
      return piece;
    }
    const bytes = this.#bytes as Uint8Array;
    const left = bytes.byteLength - this.#at;
    if (size > left) throw new ClientError(`${where}: binary_data_size is ${size} but only ${left} bytes of binary data are left after the JSON header and the tensors before it`);
    this.#at += size;
    return bytes.subarray(this.#at - size, this.#at);
  }

  /** Checks that the tensors' binary_data_size account for every byte. */
  finish(): void {
    if (Array.isArray(this.#bytes)) {
      const left = this.#bytes.length - this.#at;
      if (left > 0) throw new ClientError(`the ${this.#kind} has binary data for ${left} more tensors than have binary_data_size`);
      return;
    }
    const left = ((this.#bytes as Uint8Array | undefined)?.byteLength ?? 0) - this.#at;
    if (left > 0) throw new ClientError(`the ${this.#kind} has ${left} bytes of binary data that no tensor's binary_data_size accounts for`);
  }
}

/** The bytes of a body, whole or in pieces. */
export function bodyLength(body: Uint8Array | V2Pieces): number {
  return body instanceof Uint8Array ? body.byteLength : body.parts.reduce((sum, part) => sum + part.byteLength, body.header.byteLength);
}

/**
 * Splits a body into its JSON header, parsed, and the binary data after it. `headerLength` is the
 * `Inference-Header-Content-Length` value as a number or as the header's text; without it the
 * whole body is JSON. A body in pieces has its header apart already, and `headerLength` is not
 * looked at.
 */
export function splitBody(body: Uint8Array | V2Pieces, headerLength: number | string | undefined, kind: "request" | "response"): { header: unknown; tail: BinaryTail } {
  if (!(body instanceof Uint8Array)) return { header: parseHeader(body.header, kind, ""), tail: new BinaryTail(body.parts, kind) };
  let length = body.byteLength;
  if (headerLength !== undefined) {
    length = typeof headerLength === "number" ? headerLength : /^\s*[0-9]+\s*$/.test(headerLength) ? Number(headerLength) : NaN;
    if (!Number.isSafeInteger(length) || length < 0 || length > body.byteLength) {
      throw new ClientError(`${HEADER} is ${JSON.stringify(headerLength)}; it must be a whole number of bytes, at most the body's ${body.byteLength}`);
    }
  }
  const header = parseHeader(body.subarray(0, length), kind, headerLength === undefined ? "" : ` (its first ${length} bytes, by ${HEADER})`);
  return { header, tail: new BinaryTail(headerLength === undefined ? undefined : body.subarray(length), kind) };
}

function parseHeader(bytes: Uint8Array, kind: string, within: string): unknown {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw new ClientError(`the ${kind}'s JSON${within} is invalid: ${(err as Error).message}`);
  }
}

/**
 * A tensor's binary data as the array a {@link V2Tensor} holds, checked against the shape.
 * Numeric data is a view onto `bytes` (no copy) when its offset in the underlying buffer is a
 * multiple of the element size, else one copy; BYTES elements are always views. Views keep the
 * whole body alive and die with it if its buffer is transferred.
 */
export function readBinaryData(where: string, datatype: V2Datatype, shape: readonly number[], bytes: Uint8Array): TypedArray | Uint8Array[] {
  const count = elementCount(shape);
  if (!isNumeric(datatype)) return readBytesElements(where, shape, count, bytes);
  const array = typedArrayFor(datatype);
  const size = array.BYTES_PER_ELEMENT;
  if (bytes.byteLength !== count * size) {
    throw new ClientError(`${where}: binary_data_size is ${bytes.byteLength} where shape ${formatShape(shape)} of ${datatype} takes ${count * size} bytes`);
  }
  const data = fromBytes(array, bytes, true);
  if (datatype === "BOOL") {
    const i = data.findIndex((x) => x > 1);
    if (i >= 0) throw new ClientError(`${where}: BOOL element ${i} is the byte ${data[i]}; binary BOOL elements are 0 (false) or 1 (true)`);
  }
  return data;
}

// Reads no more elements than the shape has: the count was checked against the request's limits,
// and 10 MB of empty elements would otherwise make millions of views.
function readBytesElements(where: string, shape: readonly number[], count: number, bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const elements: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.byteLength) {
    if (elements.length === count) throw new ClientError(`${where}: binary data holds more than the ${count} BYTES elements of shape ${formatShape(shape)}: ${bytes.byteLength - at} bytes are left after them`);
    const left = bytes.byteLength - at;
    if (left < 4) throw new ClientError(`${where}: BYTES element ${elements.length} at byte ${at} is cut short: its length takes 4 bytes but ${left} remain`);
    const length = view.getUint32(at, true);
    at += 4;
    if (length > left - 4) throw new ClientError(`${where}: BYTES element ${elements.length} is ${length} bytes long but only ${left - 4} bytes of its binary_data_size remain`);
    elements.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (elements.length !== count) throw new ClientError(`${where}: binary data holds ${elements.length} BYTES elements where shape ${formatShape(shape)} needs ${count}`);
  return elements;
}

/** A tensor's data as binary data: a view of a typed array's bytes, or framed BYTES elements. */
export function writeBinaryData(data: TypedArray | Uint8Array[]): Uint8Array {
  if (!Array.isArray(data)) return bytesOf(data);
  const out = new Uint8Array(data.reduce((sum, element) => sum + 4 + element.byteLength, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const element of data) {
    view.setUint32(at, element.byteLength, true);
    out.set(element, at + 4);
    at += 4 + element.byteLength;
  }
  return out;
}

/**
 * A body from its JSON header and the binary parts that follow it, one per binary tensor in
 * header order (a tensor of zero bytes still has its part). No parts: a plain JSON body.
 */
export function joinBody(header: object, parts: readonly Uint8Array[]): V2Body {
  const json = utf8Encoder.encode(JSON.stringify(header));
  if (parts.length === 0) return { body: json, contentType: "application/json" };
  const body = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, json.byteLength));
  body.set(json);
  let at = json.byteLength;
  for (const part of parts) {
    body.set(part, at);
    at += part.byteLength;
  }
  return { body, headerLength: json.byteLength, contentType: "application/octet-stream" };
}
