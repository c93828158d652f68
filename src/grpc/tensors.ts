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
import { isNumeric, isV2Datatype, typedArrayFor } from "../tensor/datatypes.js";
import type { V2Pieces } from "../v2/types.js";
import { MESSAGE_BUFFER } from "./message-buffer.js";
import { contentsBytes, hasContents, parameterMessages, parameters, type InferRequestFields, type InferResponseMessage, type TensorMessage } from "./messages.js";

/** A ModelInferRequest, as proto-loader decodes it (with the buffer it had to itself, if it did). */
export interface InferRequestMessage extends InferRequestFields {
  [MESSAGE_BUFFER]?: ArrayBuffer;
}

const utf8 = new TextEncoder();

/**
 * The V2 REST body of a gRPC inference request, in pieces, with its size in bytes and the buffers
 * to move (not copy) to a worker: every piece's, each held by nothing else. Raw contents stay
 * views of their message when it had its buffer to itself (that buffer moves), else are copied.
 * Throws a {@link ClientError} for raw contents that do not match the inputs and for typed
 * contents in the wrong field or out of range. For a model in MLServer's format (`mlserver`), the
 * outputs are asked as JSON (its answer becomes typed contents), and an input whose datatype is
 * none of V2's goes on without contents, for MLServer's own types to refuse in its words.
 */
export function requestBody(request: InferRequestMessage, mlserver = false): { body: V2Pieces; bytes: number; transfer: ArrayBuffer[] } {
  const binaryOutputs = !mlserver;
  const raw = request.raw_input_contents;
  if (raw.length > 0 && raw.length !== request.inputs.length) {
    throw new ClientError(`raw_input_contents holds ${raw.length} tensors for ${request.inputs.length} inputs; give one per input, in the order of inputs`);
  }
  let parts = request.inputs.map((input, i) => (raw.length > 0 ? rawPart(input, raw[i]!) : mlserver && !isV2Datatype(input.datatype) ? new Uint8Array(0) : contentsBytes(input, `input '${input.name}'`, "raw_input_contents")));
  if (raw.length > 0) {
    const buffer = request[MESSAGE_BUFFER];
    // Uint8Array's slice copies, where a Buffer's would be a view.
    parts = buffer !== undefined && mostOf(buffer, parts) ? aligned(request.inputs, parts, buffer) : parts.map((part) => Uint8Array.prototype.slice.call(part));
  }
  const header = {
    ...(request.id === "" ? {} : { id: request.id }),
    parameters: binaryOutputs ? { ...parameters(request.parameters), binary_data_output: true } : parameters(request.parameters),
    inputs: request.inputs.map((input, i) => ({ name: input.name, datatype: input.datatype, shape: input.shape.map(Number), parameters: { ...parameters(input.parameters), binary_data_size: parts[i]!.byteLength } })),
    ...(request.outputs.length === 0 ? {} : { outputs: request.outputs.map((o) => ({ name: o.name, parameters: binaryOutputs ? { ...parameters(o.parameters), binary_data: true } : parameters(o.parameters) })) }),
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
  if (hasContents(input)) {
    throw new ClientError(`input '${input.name}' has contents while the request has raw_input_contents; use one or the other for all inputs`);
  }
  return raw;
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

