/**
 * gRPC answers as MLServer gives them, for the models served from its format: outputs in typed
 * contents unless the request sent raw contents (then raw, as Shoal's), and the response's
 * headers (its `parameters.headers`, CloudEvents' among them) as trailing metadata.
 */
import { Metadata } from "@grpc/grpc-js";
import { HEADER_LENGTH, writeBinaryData } from "../v2/binary.js";
import { decodeInferenceResponse } from "../v2/response.js";
import { parameterMessages, typedContents, type InferResponseMessage } from "./messages.js";

/**
 * The ModelInferResponse of a worker's V2 response body (JSON, or with binary data after
 * `headerLength` bytes): typed contents, or raw ones when `raw` (the request's were) or for an
 * FP16 output, which has no typed field; and the headers a stream's response holds in its
 * `parameters.headers` (a gRPC call sends the last one's as its trailing metadata). The
 * coordinator reads the body here, as MLServer's answer asks; the elements it copies are bounded
 * by the answer's size.
 */
export function mlserverResponse(body: Uint8Array, headerLength: string | undefined, raw: boolean): { response: InferResponseMessage; headers: Record<string, string> | undefined } {
  const decoded = decodeInferenceResponse(body, headerLength);
  const contents: Uint8Array[] = [];
  const outputs = decoded.outputs.map(({ name, datatype, shape, data, parameters }) => {
    const typed = raw ? undefined : typedContents(datatype, data);
    if (typed === undefined) contents.push(writeBinaryData(data));
    // MLServer's raw answer has each output's contents empty, not absent.
    return { name, datatype, shape, parameters: parameterMessages(parameters ?? {}), contents: (typed ?? {}) as InferResponseMessage["outputs"][number]["contents"] };
  });
  // Raw contents go for every output or none: an FP16 output among typed ones makes them all raw.
  if (contents.length > 0 && contents.length < outputs.length) return mlserverResponse(body, headerLength, true);
  const { headers, ...parameters } = decoded.parameters ?? {};
  const response = { model_name: decoded.model_name, model_version: decoded.model_version ?? "", id: decoded.id ?? "", parameters: parameterMessages(parameters), outputs, raw_output_contents: contents };
  return { response, headers: typeof headers === "object" && headers !== null ? (headers as Record<string, string>) : undefined };
}

// Headers of the HTTP answer that are not the response's own.
const TRANSPORT = new Set([HEADER_LENGTH, "content-type", "content-length"]);

/** A response's headers as the trailing metadata MLServer sends them in. */
export function trailingMetadata(headers: Record<string, string> | undefined): Metadata | undefined {
  if (headers === undefined) return undefined;
  const metadata = new Metadata();
  for (const name in headers) {
    if (TRANSPORT.has(name) || name.endsWith("-bin")) continue;
    try {
      metadata.set(name, headers[name]!);
    } catch {
      // A name gRPC metadata cannot carry: the answer goes without it.
    }
  }
  return metadata;
}
