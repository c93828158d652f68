/**
 * The V2 generate extension (`/generate`, `/generate_stream`) as the worker of a V2 model reads
 * and answers it; the HTTP thread only moves its bytes. A request's fields but `id` and
 * `parameters` are the model's inputs by name (a string is a BYTES tensor, a number or boolean a
 * scalar, an array a vector; typed and shaped as the model declares its input), and each V2
 * response (the one answer, or each chunk of a stream) becomes one JSON object with `model_name`,
 * `model_version`, `id` and each output by name (an element of one alone, a string for BYTES).
 *
 * An answer sent as JSON text (a generate answer, or the events of a stream) cannot hold binary
 * data: a request that asks for binary outputs there is refused as it is read, before it runs.
 */
import { ClientError } from "../errors.js";
import type { RequestLimits } from "../limits.js";
import { decodeInferenceRequest, decodeParsedRequest, encodeInferenceResponse } from "../v2/index.js";
import { encodeTensors } from "../v2/message.js";
import type { TensorMetadata, V2Body, V2InferenceRequest, V2InferenceResponse, V2Pieces, V2RequestedOutput } from "../v2/types.js";
import type { RequestMeta } from "../worker.js";
import { parseJsonObject } from "../codecs.js";

const utf8Encoder = new TextEncoder();

/**
 * A V2 request as the worker reads it for `meta`: a generate request's fields as its inputs, and
 * one whose answer goes as JSON text refused when it asks for binary outputs. Throws a
 * {@link ClientError} (400) that says what is wrong.
 */
export function readV2Request(body: Uint8Array | V2Pieces, headerLength: string | undefined, meta: RequestMeta, limits: RequestLimits): V2InferenceRequest {
  const { generate } = meta;
  if (generate === undefined) {
    const request = decodeInferenceRequest(body, headerLength, limits);
    if (meta.stream === true) refuseBinary(request, "its answer is a stream of JSON events");
    return request;
  }
  if (!(body instanceof Uint8Array)) throw new ClientError("a generate request is a JSON body");
  const request = decodeParsedRequest(inferenceOf(parseJsonObject(body), generate), body.byteLength, limits);
  refuseBinary(request, "a generate answer is one JSON object");
  return request;
}

/**
 * The answer to `request`: the V2 response as the request asks for it, or with `generate` (the
 * request's meta said so) the generate extension's JSON object of outputs by name.
 */
export function encodeV2Response(response: V2InferenceResponse, request: Pick<V2InferenceRequest, "outputs" | "parameters">, generate: boolean): V2Body {
  if (!generate) return encodeInferenceResponse(response, request);
  const out: Record<string, unknown> = { model_name: response.model_name };
  if (response.model_version !== undefined) out.model_version = response.model_version;
  if (response.id !== undefined) out.id = response.id;
  for (const { name, data } of encodeTensors(response.outputs, "output", () => false).json as { name: string; data: unknown[] }[]) out[name] = data.length === 1 ? data[0] : data;
  return { body: utf8Encoder.encode(JSON.stringify(out)), contentType: "application/json" };
}

// The binary extension's choice of each output, as encodeInferenceResponse makes it: its own
// `binary_data` when given, else the request's `binary_data_output`.
function refuseBinary({ parameters, outputs = [] }: V2InferenceRequest, why: string): void {
  const all = parameters?.binary_data_output === true;
  const own = (o: V2RequestedOutput) => (typeof o.parameters?.binary_data === "boolean" ? o.parameters.binary_data : undefined);
  const named = outputs.find((o) => own(o) ?? all);
  if (named === undefined && (outputs.length > 0 || !all)) return;
  const asked = named === undefined || own(named) === undefined ? "parameters.binary_data_output asks for binary outputs" : `output '${named.name}' asks for binary data`;
  throw new ClientError(`${asked}, and ${why}: ask for JSON outputs, or use /infer for binary data`);
}

// A generate request as a V2 inference request, its inputs typed by the model's.
function inferenceOf(request: Record<string, unknown>, declared: readonly TensorMetadata[]): Record<string, unknown> {
  const { id, parameters, ...fields } = request;
  if (id !== undefined && typeof id !== "string") throw new ClientError("'id' must be a string");
  if (parameters !== undefined && (typeof parameters !== "object" || parameters === null || Array.isArray(parameters))) throw new ClientError("'parameters' must be an object");
  const inputs = Object.entries(fields).map(([name, value]) => tensorOf(name, value, declared));
  if (inputs.length === 0) throw new ClientError("a generate request needs at least one input field, e.g. 'text_input'");
  return { ...(id === undefined ? {} : { id }), ...(parameters === undefined ? {} : { parameters }), inputs };
}

function tensorOf(name: string, value: unknown, inputs: readonly TensorMetadata[]): Record<string, unknown> {
  const data = Array.isArray(value) ? value : [value];
  if (data.length === 0 || !data.every((v) => typeof v === typeof data[0] && ["string", "number", "boolean"].includes(typeof v))) {
    throw new ClientError(`field '${name}' must be a string, a number, a boolean, or an array of one of them`);
  }
  const declared = inputs.find((t) => t.name === name);
  const first = data[0];
  const datatype = declared?.datatype ?? (typeof first === "string" ? "BYTES" : typeof first === "boolean" ? "BOOL" : data.every(Number.isInteger) ? "INT64" : "FP64");
  return { name, datatype, shape: shapeFor(declared?.shape, data.length), data };
}

// The declared shape with its one free dimension taking what the other dimensions leave, when
// that fits; else a vector.
function shapeFor(declared: readonly number[] | undefined, n: number): number[] {
  if (declared === undefined || declared.filter((d) => d === -1).length > 1) return [n];
  const fixed = declared.filter((d) => d !== -1).reduce((a, b) => a * b, 1);
  if (!declared.includes(-1)) return fixed === n ? [...declared] : [n];
  return n % fixed === 0 ? declared.map((d) => (d === -1 ? n / fixed : d)) : [n];
}

