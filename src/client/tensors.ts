/**
 * Tensors as a caller gives and reads them: typed arrays as they are (their datatype told by their
 * class), plain arrays of numbers, bigints, booleans or strings converted once, and the outputs of
 * a response by name.
 */
import { isNumeric, typedArrayFor, type TypedArray, type V2Datatype } from "../tensor/datatypes.js";
import type { V2InferenceRequest, V2InferenceResponse, V2Tensor } from "../v2/types.js";
import { ProtocolError } from "./errors.js";

/** A tensor's elements: a typed array (sent as it is), BYTES elements, or a plain array to convert. */
export type TensorData = TypedArray | Uint8Array[] | readonly number[] | readonly bigint[] | readonly boolean[] | readonly string[];

/** An input as the caller gives it. */
export interface InputTensor {
  name: string;
  /** Told by the typed array's class when left out (Float32Array: FP32, BigInt64Array: INT64, ...); strings: BYTES; booleans: BOOL. A plain array of numbers needs it. */
  datatype?: V2Datatype;
  /** The elements' count, as one dimension, when left out. */
  shape?: number[];
  data: TensorData;
  parameters?: Record<string, unknown>;
}

/** An inference request as the caller gives it. */
export interface InferInput {
  id?: string;
  parameters?: Record<string, unknown>;
  inputs: InputTensor[];
  /** The outputs to send back, by name, in this order (all of the model's when left out). */
  outputs?: (string | { name: string; parameters?: Record<string, unknown> })[];
}

// The datatype a typed array's class holds; Uint8Array is UINT8 (say BOOL for booleans) and
// Uint16Array UINT16 (say FP16 for half floats).
const BY_CLASS = new Map<unknown, V2Datatype>([
  [Uint8Array, "UINT8"],
  [Uint16Array, "UINT16"],
  [Uint32Array, "UINT32"],
  [BigUint64Array, "UINT64"],
  [Int8Array, "INT8"],
  [Int16Array, "INT16"],
  [Int32Array, "INT32"],
  [BigInt64Array, "INT64"],
  [Float32Array, "FP32"],
  [Float64Array, "FP64"],
]);

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/**
 * The V2 tensor of an input: a typed array of its datatype's class is used as it is (no copy); a
 * plain array is converted once. Throws a TypeError when the datatype cannot be told or the data
 * cannot be of it.
 */
export function toTensor(input: InputTensor): V2Tensor {
  const { name, data, parameters } = input;
  const datatype = input.datatype ?? datatypeOf(name, data);
  const shape = input.shape ?? [data.length];
  return { name, datatype, shape, data: elements(name, datatype, data), ...(parameters === undefined ? {} : { parameters }) };
}

function datatypeOf(name: string, data: TensorData): V2Datatype {
  if (ArrayBuffer.isView(data)) return BY_CLASS.get(data.constructor)!;
  const first = (data as readonly unknown[])[0];
  if (typeof first === "string" || first instanceof Uint8Array) return "BYTES";
  if (typeof first === "boolean") return "BOOL";
  if (typeof first === "bigint") return "INT64";
  throw new TypeError(`input '${name}': give its datatype, or its data as a typed array`);
}

function elements(name: string, datatype: V2Datatype, data: TensorData): TypedArray | Uint8Array[] {
  if (!isNumeric(datatype)) {
    if (ArrayBuffer.isView(data)) throw new TypeError(`input '${name}' is BYTES: give its elements as strings or Uint8Arrays, not a ${data.constructor.name}`);
    return (data as readonly unknown[]).map((e) => (typeof e === "string" ? utf8.encode(e) : (e as Uint8Array)));
  }
  const array = typedArrayFor(datatype);
  if (data instanceof array) return data;
  if (ArrayBuffer.isView(data)) throw new TypeError(`input '${name}' is ${datatype}: give a ${array.name}, not a ${data.constructor.name}`);
  const values = data as readonly unknown[];
  if (array === BigInt64Array || array === BigUint64Array) return (array as BigInt64ArrayConstructor).from(values, (v) => BigInt(v as number | bigint));
  return (array as Float64ArrayConstructor).from(values, (v) => Number(v));
}

/** A response's output by name; throws a {@link ProtocolError} naming the outputs it has when there is none. */
export function outputOf(response: V2InferenceResponse, name: string): V2Tensor {
  const found = response.outputs.find((output) => output.name === name);
  if (found !== undefined) return found;
  throw new ProtocolError(`the response has no output '${name}'; its outputs: ${response.outputs.map((o) => `'${o.name}'`).join(", ") || "none"}`);
}

/** A BYTES tensor's elements as UTF-8 text. */
export function textOf(tensor: V2Tensor): string[] {
  if (!Array.isArray(tensor.data)) throw new TypeError(`output '${tensor.name}' is ${tensor.datatype}, not BYTES`);
  return tensor.data.map((e) => fromUtf8.decode(e));
}

/** The V2 request of the caller's input: its tensors converted, its outputs named. */
export function toRequest(input: InferInput): V2InferenceRequest {
  const { id, parameters, outputs } = input;
  return {
    ...(id === undefined ? {} : { id }),
    ...(parameters === undefined ? {} : { parameters }),
    inputs: input.inputs.map(toTensor),
    ...(outputs === undefined ? {} : { outputs: outputs.map((o) => (typeof o === "string" ? { name: o } : o)) }),
  };
}
