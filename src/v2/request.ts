/**
 * V2 inference requests. Servers decode them (in workers: the HTTP thread only moves the bytes);
 * clients and tests encode them.
 */
import { ClientError } from "../errors.js";
import { UNLIMITED, type RequestLimits } from "../limits.js";
import { BinaryTail, bodyLength, joinBody, splitBody } from "./binary.js";
import { describe } from "./json-data.js";
import { decodeTensors, defined, duplicate, encodeTensors, optionalParameters, optionalString } from "./message.js";
import { isObject } from "./tensor.js";
import type { V2Body, V2InferenceRequest, V2Pieces, V2RequestedOutput } from "./types.js";

function decodeRequestedOutputs(outputs: unknown): V2RequestedOutput[] {
  if (!Array.isArray(outputs)) throw new ClientError(`"outputs" must be a list of { "name": ..., "parameters": ... }; got ${describe(outputs)}`);
  const requested = outputs.map((output, i): V2RequestedOutput => {
    if (!isObject(output) || typeof output.name !== "string" || output.name === "") throw new ClientError(`requested output ${i} must be an object with a "name" string`);
    const parameters = optionalParameters(`requested output '${output.name}'`, output.parameters, "binary_data");
    return defined({ name: output.name, parameters });
  });
  const twice = duplicate(requested.map((output) => output.name));
  if (twice !== undefined) throw new ClientError(`requested output '${twice}' appears twice`);
  return requested;
}

/**
 * Decodes the body of `POST /v2/models/{model}/infer`.
 *
 * `headerLength` is the `Inference-Header-Content-Length` value (a number, or the header's text)
 * if the request has one: the JSON header is then the body's first `headerLength` bytes and the
 * binary data of the inputs with `parameters.binary_data_size` follows, in input order. Numeric
 * binary data is a view onto `body` where its offset is aligned to the element size, else a copy.
 * A body in {@link V2Pieces} has its header and each tensor's binary data apart (no header length).
 *
 * JSON `data` may be flat or nested as the shape (row-major); INT64/UINT64 elements may be decimal
 * strings, float elements null or "NaN"/"Infinity"/"-Infinity", BYTES elements are UTF-8 strings.
 * Fields the protocol does not define (Triton's example sends `model_name`) are ignored.
 *
 * `limits` bound the elements of all inputs together (`maxTensorElements`) and their BYTES
 * elements (`maxBytesElements`); each input's shape is checked against what is left of them
 * before its data is read or any array of it is made.
 *
 * Throws a {@link ClientError} (400) that names the input and says what is wrong: invalid JSON, a
 * bad datatype or shape (-1 is for model metadata only), a shape beyond the limits, data that
 * does not fit the shape or the datatype (a JSON number beyond a float datatype's range among
 * them), bad nesting, a missing or out-of-range `binary_data_size`, binary data left over.
 */
export function decodeInferenceRequest(body: Uint8Array | V2Pieces, headerLength?: number | string, limits: RequestLimits = UNLIMITED): V2InferenceRequest {
  const { header, tail } = splitBody(body, headerLength, "request");
  return decodeHeader(header, tail, bodyLength(body), limits);
}

/**
 * Decodes a request already parsed from JSON, with no binary data (one the V2 generate extension
 * builds from its fields), as {@link decodeInferenceRequest} decodes a body: `bytes` is the size
 * of the JSON it was parsed from, which bounds what its shapes may claim.
 */
export function decodeParsedRequest(header: unknown, bytes: number, limits: RequestLimits = UNLIMITED): V2InferenceRequest {
  return decodeHeader(header, new BinaryTail(undefined, "request"), bytes, limits);
}

function decodeHeader(header: unknown, tail: BinaryTail, bytes: number, limits: RequestLimits): V2InferenceRequest {
  if (!isObject(header)) throw new ClientError(`the request must be a JSON object with "inputs"; got ${describe(header)}`);
  const id = optionalString("the request", "id", header.id);
  const parameters = optionalParameters("the request", header.parameters, "binary_data_output");
  // No JSON text holds more elements than it has bytes, which bounds what shapes may claim.
  const inputs = decodeTensors(header.inputs, "inputs", "input", tail, bytes, limits);
  const outputs = header.outputs === undefined ? undefined : decodeRequestedOutputs(header.outputs);
  return defined({ id, parameters, inputs, outputs });
}

/** Which inputs {@link encodeInferenceRequest} sends as binary data. */
export interface EncodeRequestOptions {
  /** true: every input; a list: the inputs of those names; false or absent: none (all JSON). */
  binaryInputs?: boolean | readonly string[];
}

/**
 * Encodes a request as a client sends it: JSON, or a JSON header followed by the binary data of
 * the inputs chosen by `options.binaryInputs`. Ask for binary outputs with
 * `parameters.binary_data_output` or a requested output's `parameters.binary_data`. Throws an
 * EncodingError when an input's data does not fit its datatype and shape.
 */
export function encodeInferenceRequest(request: V2InferenceRequest, options: EncodeRequestOptions = {}): V2Body {
  const { binaryInputs = false } = options;
  const binary = (name: string): boolean => (typeof binaryInputs === "boolean" ? binaryInputs : binaryInputs.includes(name));
  const { json, parts } = encodeTensors(request.inputs, "input", (i) => binary(request.inputs[i]!.name));
  return joinBody(defined({ id: request.id, parameters: request.parameters, inputs: json, outputs: request.outputs }), parts);
}
