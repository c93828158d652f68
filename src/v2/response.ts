/**
 * V2 inference responses. Servers encode them (in workers, with the request they answer, which
 * says which outputs to send and how); clients and tests decode them.
 */
import { ClientError } from "../errors.js";
import { UNLIMITED } from "../limits.js";
import { joinBody, splitBody } from "./binary.js";
import { describe } from "./json-data.js";
import { decodeTensors, defined, encodeTensors, optionalParameters, optionalString } from "./message.js";
import { isObject } from "./tensor.js";
import type { V2Body, V2InferenceRequest, V2InferenceResponse, V2Tensor } from "./types.js";

/**
 * Encodes the response to `request`.
 *
 * Which outputs: the request's `outputs`, by name and in that order, when it lists any (a name the
 * response lacks throws a {@link ClientError} that names it and the model's outputs); else all of
 * the response's outputs. How: an output is binary data when its requested output's
 * `parameters.binary_data` is true, or when that is not given and the request's
 * `parameters.binary_data_output` is true; else JSON (64-bit integers
 * beyond ±(2^53 - 1) and non-finite floats become strings, FP16 becomes numbers).
 *
 * Returns the body; with any binary output also the JSON header's length, for the
 * `Inference-Header-Content-Length` response header, and the content type
 * `application/octet-stream` (as Triton answers), else `application/json`. Throws an
 * EncodingError (500) when an output's data does not fit its datatype and shape, and a
 * {@link ClientError} for a BYTES output that is not UTF-8 but asked for as JSON.
 */
export function encodeInferenceResponse(response: V2InferenceResponse, request: Pick<V2InferenceRequest, "outputs" | "parameters">): V2Body {
  const all = request.parameters?.binary_data_output === true;
  let outputs: readonly V2Tensor[] = response.outputs;
  let binaryAt: (index: number) => boolean = () => all;
  const requested = request.outputs ?? [];
  if (requested.length > 0) {
    outputs = requested.map(({ name }) => {
      const output = response.outputs.find((tensor) => tensor.name === name);
      if (output !== undefined) return output;
      const names = response.outputs.map((tensor) => `'${tensor.name}'`).join(", ") || "none";
      throw new ClientError(`model '${response.model_name}' has no output '${name}'; its outputs: ${names}`);
    });
    binaryAt = (i) => {
      const own = requested[i]!.parameters?.binary_data;
      return typeof own === "boolean" ? own : all;
    };
  }
  const { json, parts } = encodeTensors(outputs, "output", binaryAt);
  const { model_name, model_version, id, parameters } = response;
  return joinBody(defined({ model_name, model_version, id, parameters, outputs: json }), parts);
}

/**
 * Decodes a response body as a client reads it, with `headerLength` from its
 * `Inference-Header-Content-Length` header if it has one. Outputs decode as a request's inputs do
 * (binary data as views onto `body`), and malformed bodies throw the same {@link ClientError}s.
 */
export function decodeInferenceResponse(body: Uint8Array, headerLength?: number | string): V2InferenceResponse {
  const { header, tail } = splitBody(body, headerLength, "response");
  if (!isObject(header) || typeof header.model_name !== "string") throw new ClientError(`the response must be a JSON object with "model_name" and "outputs"; got ${describe(header)}`);
  const model_version = optionalString("the response", "model_version", header.model_version);
  const id = optionalString("the response", "id", header.id);
  const parameters = optionalParameters("the response", header.parameters);
  const outputs = decodeTensors(header.outputs, "outputs", "output", tail, body.byteLength, UNLIMITED);
  return defined({ model_name: header.model_name, model_version, id, parameters, outputs });
}
