/**
 * gRPC inference messages and the V2 REST body with binary tensor data, both ways. A
 * ModelInferRequest becomes the body a REST client would send with every input binary and every
 * output asked for as binary, in pieces (V2Pieces: the JSON header, then each input's bytes,
 * not joined): raw contents as they came, typed contents laid out as raw ones. The worker's
 * answer, a JSON header and the outputs' bytes, becomes a ModelInferResponse with
 * `raw_output_contents` that view those bytes. So a gRPC request takes the same way through the
 * workers as a REST one, and the worker checks both alike: shapes, sizes, limits and the
 * model's inputs.
 */
import { ClientError, EncodingError } from "../errors.js";
import { bytesOf } from "../tensor/bytes.js";
import { isNumeric, isV2Datatype, typedArrayFor, type NumericDatatype, type V2Datatype } from "../tensor/datatypes.js";
import { writeBinaryData } from "../v2/binary.js";
import type { V2Pieces } from "../v2/types.js";
import { MESSAGE_BUFFER } from "./message-buffer.js";


/** A parameter's value as proto-loader gives it (`oneofs: true`, 64-bit integers as strings). */
export interface ParameterMessage {
  parameter_choice?: "bool_param" | "int64_param" | "string_param" | "double_param" | "uint64_param";
  bool_param?: boolean;
  int64_param?: string;
  string_param?: string;
  double_param?: number;
  uint64_param?: string;
}

/** The typed contents of a tensor. */
export interface ContentsMessage {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: string[];
  uint_contents: number[];
  uint64_contents: string[];
  fp32_contents: number[];
  fp64_contents: number[];
  bytes_contents: Uint8Array[];
}

interface TensorMessage {
  name: string;
  datatype: string;
  shape: (string | number)[];
  parameters: Record<string, ParameterMessage>;
  contents?: ContentsMessage | null;
}

/** A ModelInferRequest, as proto-loader decodes it (with the buffer it had to itself, if it did). */
export interface InferRequestMessage {
  [MESSAGE_BUFFER]?: ArrayBuffer;
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, ParameterMessage>;
  inputs: TensorMessage[];
  outputs: { name: string; parameters: Record<string, ParameterMessage> }[];
  raw_input_contents: Uint8Array[];
}

/** A ModelInferResponse, as proto-loader encodes it. */
export interface InferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, ParameterMessage>;
  outputs: { name: string; datatype: string; shape: number[]; parameters: Record<string, ParameterMessage> }[];
  raw_output_contents: Uint8Array[];
}

// The typed contents field of each datatype; FP16 has none (raw contents only).
const CONTENTS: Record<V2Datatype, keyof ContentsMessage | undefined> = {
  BOOL: "bool_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  FP16: undefined,
  FP32: "fp32_contents",
  FP64: "fp64_contents",
  BYTES: "bytes_contents",
};
const FIELDS = Object.keys({ bool_contents: 0, int_contents: 0, int64_contents: 0, uint_contents: 0, uint64_contents: 0, fp32_contents: 0, fp64_contents: 0, bytes_contents: 0 } satisfies Record<keyof ContentsMessage, 0>) as (keyof ContentsMessage)[];

const utf8 = new TextEncoder();

/**
 * The V2 REST body of a gRPC inference request, in pieces, with its size in bytes and the buffers
 * to move (not copy) to a worker: every piece's, each held by nothing else. Raw contents stay
 * views of their message when it had its buffer to itself (that buffer moves), else are copied.
 * Throws a {@link ClientError} for raw contents that do not match the inputs and for typed
 * contents in the wrong field or out of range.
 */
export function requestBody(request: InferRequestMessage): { body: V2Pieces; bytes: number; transfer: ArrayBuffer[] } {
  const raw = request.raw_input_contents;
  if (raw.length > 0 && raw.length !== request.inputs.length) {
    throw new ClientError(`raw_input_contents holds ${raw.length} tensors for ${request.inputs.length} inputs; give one per input, in the order of inputs`);
  }
  let parts = request.inputs.map((input, i) => (raw.length > 0 ? rawPart(input, raw[i]!) : contentsPart(input)));
  if (raw.length > 0) {
    const buffer = request[MESSAGE_BUFFER];
    // Uint8Array's slice copies, where a Buffer's would be a view.
    parts = buffer !== undefined && mostOf(buffer, parts) ? aligned(request.inputs, parts, buffer) : parts.map((part) => Uint8Array.prototype.slice.call(part));
  }
  const header = {
    ...(request.id === "" ? {} : { id: request.id }),
    parameters: { ...parameters(request.parameters), binary_data_output: true },
    inputs: request.inputs.map((input, i) => ({ name: input.name, datatype: input.datatype, shape: input.shape.map(Number), parameters: { ...parameters(input.parameters), binary_data_size: parts[i]!.byteLength } })),
    ...(request.outputs.length === 0 ? {} : { outputs: request.outputs.map((o) => ({ name: o.name, parameters: { ...parameters(o.parameters), binary_data: true } })) }),
  };
  const json = utf8.encode(JSON.stringify(header));
  const transfer = new Set<ArrayBuffer>([json.buffer as ArrayBuffer]);
  for (const part of parts) transfer.add(part.buffer as ArrayBuffer);
  return { body: { header: json, parts }, bytes: parts.reduce((sum, part) => sum + part.byteLength, json.byteLength), transfer: [...transfer] };
}

// Whether the raw contents are views of `buffer` and fill at least 7/8 of it, so that moving the
// whole buffer holds little more than the request is counted for: a message padded with fields
// protobuf skips, or one that inflated from a few bytes, is copied out instead.
function mostOf(buffer: ArrayBuffer, parts: Uint8Array[]): boolean {
  let bytes = 0;
  for (const part of parts) {
    if (part.buffer !== buffer) return false;
    bytes += part.byteLength;
  }
  return bytes * 8 >= buffer.byteLength * 7;
}

// Raw contents sit in their message wherever its protobuf framing put them, mostly at offsets a
// worker cannot view FP32 or wider elements at (it would copy them). The message's bytes around
// them are dead once decoded, so each is moved back to the nearest multiple of 8 (else of its
// element size) that does not reach into the one before it: one memmove within the buffer, no
// allocation.
function aligned(inputs: readonly TensorMessage[], parts: Uint8Array[], buffer: ArrayBuffer): Uint8Array[] {
  const whole = new Uint8Array(buffer);
  let floor = 0;
  return parts.map((part, i) => {
    const datatype = inputs[i]!.datatype;
    const size = isV2Datatype(datatype) && isNumeric(datatype) ? typedArrayFor(datatype).BYTES_PER_ELEMENT : 1;
    let at = part.byteOffset;
    if (at >= floor && at % size !== 0) {
      const target = [at - (at % 8), at - (at % size)].find((t) => t >= floor);
      if (target !== undefined) {
        whole.copyWithin(target, at, at + part.byteLength);
        at = target;
      }
    }
    floor = at + part.byteLength;
    return at === part.byteOffset ? part : new Uint8Array(buffer, at, part.byteLength);
  });
}

function rawPart(input: TensorMessage, raw: Uint8Array): Uint8Array {
  const contents = input.contents;
  if (contents != null && FIELDS.some((f) => contents[f].length > 0)) {
    throw new ClientError(`input '${input.name}' has contents while the request has raw_input_contents; use one or the other for all inputs`);
  }
  return raw;
}

// Typed contents laid out as raw contents: little-endian elements, BYTES elements framed.
function contentsPart(input: TensorMessage): Uint8Array {
  const where = `input '${input.name}'`;
  const { datatype } = input;
  if (!isV2Datatype(datatype)) throw new ClientError(`${where}: unknown datatype ${JSON.stringify(datatype.slice(0, 20))}`);
  const field = CONTENTS[datatype];
  const contents = input.contents;
  const other = contents == null ? undefined : FIELDS.find((f) => f !== field && contents[f].length > 0);
  if (other !== undefined) throw new ClientError(`${where} is ${datatype}: its elements go in ${field ?? "raw_input_contents"}, not ${other}`);
  if (field === undefined || contents == null) return new Uint8Array(0);
  const values = contents[field];
  if (datatype === "BYTES") return writeBinaryData(values as Uint8Array[]);
  if (datatype === "BOOL") return Uint8Array.from(values as boolean[], (v) => (v ? 1 : 0));
  if (datatype === "INT64") return bytesOf(BigInt64Array.from(values as string[], (v) => BigInt(v)));
  if (datatype === "UINT64") return bytesOf(BigUint64Array.from(values as string[], (v) => BigInt(v)));
  const array = typedArrayFor(datatype as Exclude<NumericDatatype, "BOOL" | "INT64" | "UINT64">).from(values as number[]);
  if (datatype !== "FP32" && datatype !== "FP64") {
    const i = array.findIndex((v, at) => v !== values[at]);
    if (i >= 0) throw new ClientError(`${where}: element ${i} (${String(values[i])}) is out of the range of ${datatype}`);
  }
  return bytesOf(array);
}

/**
 * The ModelInferResponse of a worker's V2 response body, given with its header length: each
 * output's bytes as a view of `body`. Throws an {@link EncodingError} for an output without
 * binary data, which a worker never writes when every output is asked for as binary.
 */
export function responseMessage(body: Uint8Array, headerLength: string | undefined): InferResponseMessage {
  const length = headerLength === undefined ? body.byteLength : Number(headerLength);
  const header = JSON.parse(Buffer.from(body.buffer, body.byteOffset, length).toString("utf8")) as {
    model_name: string;
    model_version?: string;
    id?: string;
    parameters?: Record<string, unknown>;
    outputs: { name: string; datatype: string; shape: number[]; parameters?: Record<string, unknown> }[];
  };
  let at = body.byteOffset + length;
  const raw: Uint8Array[] = [];
  const outputs = header.outputs.map(({ name, datatype, shape, parameters: { binary_data_size: size, ...rest } = {} }) => {
    if (typeof size !== "number") throw new EncodingError(`output '${name}' has no binary data`);
    raw.push(Buffer.from(body.buffer, at, size));
    at += size;
    return { name, datatype, shape, parameters: parameterMessages(rest) };
  });
  return { model_name: header.model_name, model_version: header.model_version ?? "", id: header.id ?? "", parameters: parameterMessages(header.parameters ?? {}), outputs, raw_output_contents: raw };
}

/** Parameters as the V2 JSON body holds them: 64-bit integers as numbers while exact, else as decimal strings. */
export function parameters(map: Record<string, ParameterMessage>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name in map) {
    const p = map[name]!;
    const choice = p.parameter_choice;
    if (choice === undefined) continue;
    const value = p[choice];
    out[name] = choice === "int64_param" || choice === "uint64_param" ? exactNumber(value as string) : value;
  }
  return out;
}

function exactNumber(text: string): number | string {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}

/** JSON parameters as gRPC's: integers as int64, other numbers as double, anything else but a string as its JSON text. */
export function parameterMessages(values: Record<string, unknown>): Record<string, ParameterMessage> {
  const out: Record<string, ParameterMessage> = {};
  for (const name in values) {
    const v = values[name];
    if (typeof v === "boolean") out[name] = { bool_param: v };
    else if (typeof v === "number") out[name] = Number.isSafeInteger(v) ? { int64_param: String(v) } : { double_param: v };
    else if (typeof v === "string") out[name] = { string_param: v };
    else out[name] = { string_param: JSON.stringify(v) ?? String(v) };
  }
  return out;
}
