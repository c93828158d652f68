/**
 * The request `shoal bench` sends a V2 model: made from the model's metadata (each input of its
 * datatype and shape, a variable dimension given a size, seeded values), or read from a file
 * holding a V2 inference request as JSON.
 */
import { readFileSync } from "node:fs";
import { isNumeric, typedArrayFor, type V2Datatype } from "../tensor/datatypes.js";
import type { InferInput, InputTensor } from "../client/tensors.js";
import type { ModelMetadata } from "../client/v2-types.js";

/** How inputs are made from metadata. */
export interface MadeInputs {
  /** The size of every variable (-1) dimension. */
  dynamicSize: number;
  /** Shapes given per input, over the metadata's. */
  shapes: Record<string, number[]>;
  /** Seeds the values. */
  seed?: number;
}

/** An input of each of the model's, of its datatype and shape, with values any model of it takes (small, non-negative). */
export function inputsFromMetadata(metadata: ModelMetadata, o: MadeInputs): InferInput {
  const random = seeded(o.seed ?? 1);
  if (metadata.inputs.length === 0) throw new Error(`the metadata of '${metadata.name}' lists no inputs: give them with --input-file`);
  return {
    inputs: metadata.inputs.map((input): InputTensor => {
      const datatype = input.datatype as V2Datatype;
      const shape = o.shapes[input.name] ?? input.shape.map((d) => (d < 0 ? o.dynamicSize : d));
      const count = shape.reduce((n, d) => n * d, 1);
      return { name: input.name, datatype, shape, data: values(datatype, count, random) };
    }),
  };
}

function values(datatype: V2Datatype, count: number, random: () => number): InputTensor["data"] {
  if (datatype === "BYTES") return Array.from({ length: count }, (_, i) => `shoal ${i}`);
  if (datatype === "BOOL") return Array.from({ length: count }, () => random() < 0.5);
  // 1.0 in half precision: a plain value of every FP16 model.
  if (datatype === "FP16") return new Uint16Array(count).fill(0x3c00);
  if (!isNumeric(datatype)) throw new Error(`cannot make values of datatype ${datatype as string}`);
  const Array_ = typedArrayFor(datatype);
  const float = datatype === "FP32" || datatype === "FP64";
  const data = new Array_(count);
  for (let i = 0; i < count; i++) {
    const v = float ? random() : Math.floor(random() * 8);
    (data as unknown as (number | bigint)[])[i] = data instanceof BigInt64Array || data instanceof BigUint64Array ? BigInt(v) : v;
  }
  return data;
}

/**
 * A V2 inference request read from a JSON file (`{"inputs": [{"name", "datatype", "shape",
 * "data"}], ...}`, data flat or nested), as the client takes it.
 */
export function inputsFromFile(file: string): InferInput {
  const body = JSON.parse(readFileSync(file, "utf8")) as { inputs?: unknown; parameters?: Record<string, unknown>; outputs?: InferInput["outputs"] };
  if (!Array.isArray(body.inputs)) throw new Error(`${file} is not a V2 inference request: it has no "inputs" list`);
  return {
    ...(body.parameters === undefined ? {} : { parameters: body.parameters }),
    ...(body.outputs === undefined ? {} : { outputs: body.outputs }),
    inputs: (body.inputs as (InputTensor & { data: unknown[] })[]).map((t) => ({ ...t, data: (t.data as unknown[]).flat(Infinity) as InputTensor["data"] })),
  };
}

/** A small seeded generator of [0, 1) (mulberry32): the same values on every run. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
