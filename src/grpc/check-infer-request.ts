/**
 * What a ModelInferRequest would make the HTTP thread allocate, counted from its protobuf bytes
 * before protobuf.js decodes it. Decoding makes an object for each repeated entry: an empty
 * `bytes_contents` element is 2 bytes on the wire and a Buffer of its own once decoded, so a
 * 10 MiB message (or 10 KiB of gzip) could cost hundreds of MB. The counts are checked against
 * the request limits a worker applies, and a few of the message's own, before anything is made.
 */
import type { RequestLimits } from "../limits.js";

/** Most inputs, requested outputs or raw contents of one request. */
export const MAX_TENSORS = 4096;
/** Most dimensions of one input's shape. */
export const MAX_DIMS = 64;
/** Most parameters of one request, its own, its inputs' and its outputs' together. */
export const MAX_PARAMETERS = 4096;

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;

// A cursor over the fields of one message; `stop` when its bytes cannot be read as protobuf,
// which protobuf.js then reports without going further than the count did.
class Fields {
  at: number;
  field = 0;
  wire = 0;
  // A length-delimited field's bytes.
  start = 0;
  end = 0;

  constructor(
    readonly bytes: Uint8Array,
    from: number,
    readonly limit: number,
  ) {
    this.at = from;
  }

  next(): boolean {
    if (this.at >= this.limit) return false;
    const tag = this.#varint();
    if (tag === undefined) return false;
    this.field = Math.floor(tag / 8);
    this.wire = tag % 8;
    if (this.wire === VARINT) return this.#varint() !== undefined;
    if (this.wire === FIXED64 || this.wire === FIXED32) {
      this.at += this.wire === FIXED64 ? 8 : 4;
      return this.at <= this.limit;
    }
    if (this.wire !== LENGTH) return false;
    const length = this.#varint();
    if (length === undefined || this.at + length > this.limit) return false;
    this.start = this.at;
    this.end = this.at + length;
    this.at = this.end;
    return true;
  }

  #varint(): number | undefined {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10 && this.at < this.limit; i++) {
      const byte = this.bytes[this.at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    return undefined;
  }
}

// Varints in a packed field's bytes: each ends with a byte below 0x80.
function varints(bytes: Uint8Array, start: number, end: number): number {
  let count = 0;
  for (let i = start; i < end; i++) if (bytes[i]! < 0x80) count++;
  return count;
}

interface Counts {
  elements: number;
  bytesElements: number;
  parameters: number;
}

/**
 * Why the ModelInferRequest in `bytes` is refused before it is decoded (too many elements,
 * tensors, dimensions or parameters), or undefined.
 */
export function checkInferRequest(bytes: Uint8Array, limits: RequestLimits): string | undefined {
  const counts: Counts = { elements: 0, bytesElements: 0, parameters: 0 };
  let inputs = 0;
  let outputs = 0;
  let raw = 0;
  const request = new Fields(bytes, 0, bytes.byteLength);
  while (request.next()) {
    if (request.wire !== LENGTH) continue;
    if (request.field === 4) counts.parameters++;
    else if (request.field === 5) {
      inputs++;
      const dims = countInput(bytes, request.start, request.end, counts);
      if (dims > MAX_DIMS) return `input ${inputs - 1} has a shape of ${dims} dimensions, more than ${MAX_DIMS}`;
    } else if (request.field === 6) {
      outputs++;
      const output = new Fields(bytes, request.start, request.end);
      while (output.next()) if (output.field === 2 && output.wire === LENGTH) counts.parameters++;
    } else if (request.field === 7) raw++;
    if (inputs > MAX_TENSORS || outputs > MAX_TENSORS || raw > MAX_TENSORS) return `the request has more than ${MAX_TENSORS} inputs, outputs or raw_input_contents`;
    if (counts.parameters > MAX_PARAMETERS) return `the request has more than ${MAX_PARAMETERS} parameters`;
    if (counts.elements > limits.maxTensorElements) return `the request holds more than ${limits.maxTensorElements} tensor elements, the server's limit (--max-tensor-elements)`;
    if (counts.bytesElements > limits.maxBytesElements) return `the request holds more than ${limits.maxBytesElements} BYTES elements, the server's limit (--max-bytes-elements)`;
  }
  return undefined;
}

// Counts one InferInputTensor's parameters and contents; returns its shape's dimensions.
function countInput(bytes: Uint8Array, start: number, end: number, counts: Counts): number {
  let dims = 0;
  const input = new Fields(bytes, start, end);
  while (input.next()) {
    if (input.field === 3) dims += input.wire === LENGTH ? varints(bytes, input.start, input.end) : 1;
    else if (input.field === 4 && input.wire === LENGTH) counts.parameters++;
    else if (input.field === 5 && input.wire === LENGTH) countContents(bytes, input.start, input.end, counts);
  }
  return dims;
}

// InferTensorContents: fields 1 to 5 are varints, 6 floats, 7 doubles (packed or not), 8 bytes.
function countContents(bytes: Uint8Array, start: number, end: number, counts: Counts): void {
  const contents = new Fields(bytes, start, end);
  while (contents.next()) {
    const { field, wire } = contents;
    if (field < 1 || field > 8) continue;
    if (field === 8) {
      counts.elements++;
      counts.bytesElements++;
    } else if (wire !== LENGTH) counts.elements++;
    else if (field === 6) counts.elements += (contents.end - contents.start) / 4;
    else if (field === 7) counts.elements += (contents.end - contents.start) / 8;
    else counts.elements += varints(bytes, contents.start, contents.end);
  }
}
