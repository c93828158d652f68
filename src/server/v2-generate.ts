import { ShoalError } from "../errors.js";
import type { TensorMetadata } from "../v2/types.js";
import type { Dialect, DialectRequest } from "./dialect.js";

/**
 * The V2 generate extension (`/generate`, `/generate_stream`) over a model's V2 inference: a
 * request's fields but `id` and `parameters` are the model's inputs by name (a string is a BYTES
 * tensor, a number or boolean a scalar, an array a vector; typed as the model declares its
 * input), and each V2 response (the one answer, or each chunk of a stream) becomes a JSON
 * object with `model_name`, `model_version`, `id` and each output by name (an element of one
 * alone, a string for BYTES). A client of `/generate_stream` takes Server-Sent Events.
 */
export class GenerateExchange implements Dialect {
  constructor(
    /** The model's inputs, to type the request's fields. */
    readonly inputs: readonly TensorMetadata[],
    readonly stream: boolean,
  ) {}

  read(body: Uint8Array): DialectRequest {
    const request = parseObject(body, "the body");
    const { id, parameters, ...fields } = request;
    if (id !== undefined && typeof id !== "string") throw new ShoalError("BAD_REQUEST", "'id' must be a string");
    if (parameters !== undefined && (typeof parameters !== "object" || parameters === null || Array.isArray(parameters))) throw new ShoalError("BAD_REQUEST", "'parameters' must be an object");
    const inputs = Object.entries(fields).map(([name, value]) => this.#tensor(name, value));
    if (inputs.length === 0) throw new ShoalError("BAD_REQUEST", "a generate request needs at least one input field, e.g. 'text_input'");
    const infer = { ...(id === undefined ? {} : { id }), ...(parameters === undefined ? {} : { parameters }), inputs };
    return { payload: Buffer.from(JSON.stringify(infer)), stream: this.stream };
  }

  chunk(bytes: Uint8Array): Uint8Array {
    return generated(bytes);
  }

  answer(bytes: Uint8Array): Uint8Array {
    return generated(bytes);
  }

  #tensor(name: string, value: unknown): Record<string, unknown> {
    const data = Array.isArray(value) ? value : [value];
    if (data.length === 0 || !data.every((v) => typeof v === typeof data[0] && ["string", "number", "boolean"].includes(typeof v))) {
      throw new ShoalError("BAD_REQUEST", `field '${name}' must be a string, a number, a boolean, or an array of one of them`);
    }
    const declared = this.inputs.find((t) => t.name === name);
    const first = data[0];
    const datatype = declared?.datatype ?? (typeof first === "string" ? "BYTES" : typeof first === "boolean" ? "BOOL" : data.every(Number.isInteger) ? "INT64" : "FP64");
    return { name, datatype, shape: shapeFor(declared?.shape, data.length), data };
  }
}

// The declared shape with its one free dimension taking what the other dimensions leave, when
// that fits; else a vector.
function shapeFor(declared: readonly number[] | undefined, n: number): number[] {
  if (declared === undefined || declared.filter((d) => d === -1).length > 1) return [n];
  const fixed = declared.filter((d) => d !== -1).reduce((a, b) => a * b, 1);
  if (!declared.includes(-1)) return fixed === n ? [...declared] : [n];
  return n % fixed === 0 ? declared.map((d) => (d === -1 ? n / fixed : d)) : [n];
}

// A V2 response (JSON) as a generate response: its outputs as fields by name.
function generated(bytes: Uint8Array): Uint8Array {
  const response = parseObject(bytes, "the model's response");
  const out: Record<string, unknown> = { model_name: response.model_name };
  if (response.model_version !== undefined) out.model_version = response.model_version;
  if (response.id !== undefined) out.id = response.id;
  for (const output of (response.outputs ?? []) as { name: string; data: unknown[] }[]) out[output.name] = output.data.length === 1 ? output.data[0] : output.data;
  return Buffer.from(JSON.stringify(out));
}

function parseObject(bytes: Uint8Array, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"));
  } catch (err) {
    throw new ShoalError("BAD_REQUEST", `${what} is not JSON: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ShoalError("BAD_REQUEST", `${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** `/infer_stream`: a V2 inference request whose responses come as Server-Sent Events, one V2 response each. */
export const INFER_STREAM: Dialect = {
  read: (body) => ({ payload: body, stream: true }),
};
