/**
 * A route of stages served as a V2 model: its requests arrive as V2 inference requests (REST or
 * gRPC) on `/v2/models/{name}/infer`. The route's first stage reads one as an object with a field
 * per input tensor, and its last stage answers the route's output object as one output tensor per
 * field; between them the stages see their usual values. What the answer needs of the request (its
 * id, the outputs it asks for and how) travels with the value from stage to stage.
 */
import { EncodingError, errorToWire, ShoalError } from "../errors.js";
import type { RequestLimits } from "../limits.js";
import { halfToNumber } from "../tensor/fp16.js";
import { HEADER_LENGTH } from "../v2/index.js";
import type { V2Body, V2InferenceRequest, V2Pieces, V2Tensor } from "../v2/types.js";
import type { RequestMeta } from "../worker.js";
import { encodeV2Response, readV2Request } from "./read-v2-request.js";
import type { ItemResult } from "./messages.js";
import { exclusive } from "./transfer.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });
const utf8Encoder = new TextEncoder();

/** What the answer to a V2 request needs: the model's name, the request but its inputs, and whether it came by the generate extension. */
export interface V2Reply {
  model: string;
  request: Omit<V2InferenceRequest, "inputs">;
  generate?: true;
}

/** A value between two stages of a V2 request, with its reply. */
export interface V2Carried {
  v2Reply: V2Reply;
  value: unknown;
}

/**
 * A V2 request body as the route's first stage takes it: `{ [input]: value }`, a tensor of one
 * element (shape `[]` or `[1]`) as that element, any other as nested arrays by its shape; BYTES
 * elements as UTF-8 text, 64-bit integers as numbers (decimal strings beyond 2^53), FP16 as numbers,
 * BOOL as booleans.
 */
export function decodeV2Item(body: Uint8Array | V2Pieces, meta: RequestMeta, limits: RequestLimits): { item: Record<string, unknown>; reply: V2Reply } {
  const header = meta.headers[HEADER_LENGTH];
  const { inputs, ...request } = readV2Request(body, Array.isArray(header) ? undefined : header, meta, limits);
  const item: Record<string, unknown> = {};
  for (const tensor of inputs) item[tensor.name] = valueOf(tensor);
  const model = meta.v2!.model;
  return { item, reply: meta.generate === undefined ? { model, request } : { model, request, generate: true } };
}

function valueOf({ name, datatype, shape, data }: V2Tensor): unknown {
  const flat: unknown[] = Array.isArray(data)
    ? data.map((bytes, i) => {
        try {
          return utf8.decode(bytes);
        } catch {
          throw new ShoalError("BAD_REQUEST", `input '${name}': BYTES element ${i} is not UTF-8 text`);
        }
      })
    : datatype === "FP16"
      ? Array.from(data as Uint16Array, halfToNumber)
      : datatype === "BOOL"
        ? Array.from(data as Uint8Array, (b) => b === 1)
        : Array.from(data as ArrayLike<number | bigint>, (v) => (typeof v === "bigint" ? (Number.isSafeInteger(Number(v)) ? Number(v) : String(v)) : v));
  if (flat.length === 1 && shape.length <= 1) return flat[0];
  return nest(flat, shape);
}

function nest(flat: unknown[], shape: readonly number[]): unknown[] {
  if (shape.length <= 1) return flat;
  const [, ...inner] = shape;
  const size = inner.reduce((a, b) => a * b, 1);
  return Array.from({ length: shape[0]! }, (_, i) => nest(flat.slice(i * size, (i + 1) * size), inner));
}

/**
 * The route's output as a V2 answer: each field of the output object an output tensor (text as
 * BYTES, numbers as FP64, booleans as BOOL, arrays of them by their nesting, anything else as its
 * JSON text in BYTES), encoded as the request asks (the outputs it names, binary or JSON).
 */
export function encodeV2Answer(output: unknown, reply: V2Reply): V2Body {
  if (output === null || typeof output !== "object" || Array.isArray(output)) throw new EncodingError("a route served as a V2 model must answer an object, one field per output tensor");
  const outputs = Object.entries(output as Record<string, unknown>).map(([name, value]) => tensorOf(name, value));
  const { id } = reply.request;
  return encodeV2Response({ model_name: reply.model, outputs, ...(id === undefined ? {} : { id }) }, reply.request, reply.generate === true);
}

function tensorOf(name: string, value: unknown): V2Tensor {
  const shape: number[] = [];
  let flat: unknown[] = [value];
  if (Array.isArray(value)) {
    // Nested arrays of equal lengths make the shape; anything ragged is one BYTES element of JSON.
    let level: unknown[] = value;
    flat = value;
    for (;;) {
      shape.push(level.length);
      if (!level.every((v) => Array.isArray(v))) break;
      const lengths = new Set(level.map((v) => (v as unknown[]).length));
      if (lengths.size !== 1) return json(name, value);
      flat = flat.flat();
      level = level[0] as unknown[];
    }
  } else shape.push(1);
  if (flat.length !== shape.reduce((a, b) => a * b, 1)) return json(name, value);
  if (flat.every((v) => typeof v === "number")) return { name, datatype: "FP64", shape, data: Float64Array.from(flat as number[]) };
  if (flat.every((v) => typeof v === "boolean")) return { name, datatype: "BOOL", shape, data: Uint8Array.from(flat as boolean[], (b) => (b ? 1 : 0)) };
  if (flat.every((v) => typeof v === "string")) return { name, datatype: "BYTES", shape, data: (flat as string[]).map((s) => utf8Encoder.encode(s)) };
  return json(name, value);
}

function json(name: string, value: unknown): V2Tensor {
  return { name, datatype: "BYTES", shape: [1], data: [utf8Encoder.encode(JSON.stringify(value) ?? "null")] };
}

/** The answer to a V2 request for a route, from its last stage's output, its bytes ready to move. */
export function v2Answer(output: unknown, reply: V2Reply, transfer: Set<ArrayBuffer>): ItemResult {
  try {
    const { body, contentType, headerLength } = encodeV2Answer(output, reply);
    const own = exclusive(body);
    if (own.byteLength > 0) transfer.add(own.buffer as ArrayBuffer);
    return { ok: true, value: own, contentType, ...(headerLength === undefined ? {} : { headers: { [HEADER_LENGTH]: String(headerLength) } }) };
  } catch (err) {
    return { ok: false, error: errorToWire(err, "ENCODING") };
  }
}
