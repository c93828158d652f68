/**
 * One tensor object of a V2 message (a request's input or a response's output): decoding it from
 * the JSON header, with its data in JSON or in the binary data after the header, and encoding a
 * {@link V2Tensor} either way.
 */
import { ClientError, EncodingError } from "../errors.js";
import type { ElementBudget } from "../tensor/element-budget.js";
import { holds, isNumeric, isV2Datatype, typedArrayFor, V2_DATATYPES } from "../tensor/datatypes.js";
import { elementCount, formatShape } from "../tensor/shape.js";
import { type BinaryTail, readBinaryData, writeBinaryData } from "./binary.js";
import { describe, readJsonData, writeJsonData } from "./json-data.js";
import type { V2Tensor } from "./types.js";

/** Which list of a message a tensor belongs to, for error messages: "input 'x'". */
export type TensorRole = "input" | "output";

/** True for a JSON object (not null, not a list). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isShape(shape: unknown): shape is number[] {
  return Array.isArray(shape) && shape.every((dim) => Number.isSafeInteger(dim) && dim >= 0);
}

// Why a tensor's datatype or shape is wrong. Decoding blames the client and encoding the model, so
// each wraps these messages in its own error.
function badDatatype(where: string, datatype: unknown): string {
  return `${where} has datatype ${describe(datatype)}; the datatypes are ${V2_DATATYPES.join(", ")}`;
}

function badShape(where: string, shape: unknown): string {
  const variable = Array.isArray(shape) && shape.includes(-1) ? " (-1, a variable dimension, belongs in model metadata, not in a tensor)" : "";
  return `${where}: shape must be a list of whole numbers >= 0; got ${describe(shape)}${variable}`;
}

// binary_data_size says how a tensor travels, so it is the codec's alone: decoded tensors drop it
// and encoding sets it only on binary tensors.
function withoutBinarySize(parameters: Record<string, unknown> | undefined): { parameters?: Record<string, unknown> } {
  if (parameters === undefined) return {};
  const { binary_data_size: _size, ...rest } = parameters;
  return Object.keys(rest).length > 0 ? { parameters: rest } : {};
}

/**
 * Decodes the tensor object at `index` of a message's inputs or outputs. Its data is JSON `data`
 * (see {@link readJsonData}), or, when `parameters.binary_data_size` is set, that many bytes of
 * `tail`. Its shape's elements are taken from `budget`, the message's limits, before its data
 * is read; `maxElements` bounds what a shape may ask of JSON data. Throws a {@link ClientError}
 * naming the tensor.
 */
export function decodeTensor(value: unknown, role: TensorRole, index: number, tail: BinaryTail, maxElements: number, budget: ElementBudget): V2Tensor {
  if (!isObject(value) || typeof value.name !== "string" || value.name === "") {
    throw new ClientError(`${role} ${index} must be an object with a "name" string, a "datatype", a "shape" and "data"`);
  }
  const { name, datatype, shape, parameters, data } = value;
  const where = `${role} '${name}'`;
  if (!isV2Datatype(datatype)) throw new ClientError(badDatatype(where, datatype));
  if (!isShape(shape)) throw new ClientError(badShape(where, shape));
  if (parameters !== undefined && !isObject(parameters)) throw new ClientError(`${where}: parameters must be an object; got ${describe(parameters)}`);
  const over = budget.take(elementCount(shape), datatype === "BYTES");
  if (over !== undefined) throw new ClientError(`${where}: ${over}`);
  const size = parameters?.binary_data_size;
  let decoded;
  if (size !== undefined) {
    if (data !== undefined) throw new ClientError(`${where} has both data and parameters.binary_data_size; give one`);
    decoded = readBinaryData(where, datatype, shape, tail.take(where, size));
  } else if (data === undefined) {
    throw new ClientError(`${where} has no data and no parameters.binary_data_size`);
  } else {
    decoded = readJsonData(where, datatype, shape, data, maxElements);
  }
  return { name, datatype, shape, data: decoded, ...withoutBinarySize(parameters) };
}

/** Checks that a tensor from a model holds what its datatype and shape say; else an {@link EncodingError}. */
function checkTensor(where: string, tensor: V2Tensor): void {
  const { datatype, shape, data } = tensor;
  if (!isV2Datatype(datatype)) throw new EncodingError(badDatatype(where, datatype));
  if (!isShape(shape)) throw new EncodingError(badShape(where, shape));
  if (!holds(datatype, data)) {
    const want = isNumeric(datatype) ? `a ${typedArrayFor(datatype).name}` : "an array of Uint8Array";
    const got = Array.isArray(data) ? "an array of other values" : ((data as object | undefined)?.constructor?.name ?? describe(data));
    throw new EncodingError(`${where}: ${datatype} data must be ${want}; got ${got}`);
  }
  const count = elementCount(shape);
  if (data.length !== count) throw new EncodingError(`${where}: data has ${data.length} elements where shape ${formatShape(shape)} needs ${count}`);
  if (datatype === "BOOL") {
    const i = (data as Uint8Array).findIndex((x) => x > 1);
    if (i >= 0) throw new EncodingError(`${where}: BOOL element ${i} is ${data[i]}; BOOL elements are 0 (false) or 1 (true)`);
  }
}

/**
 * Encodes a tensor for a message's header: with JSON `data`, or, when `binary`, with
 * `parameters.binary_data_size` and the bytes to send after the header as `part`. Throws an
 * {@link EncodingError} when the tensor's data does not fit its datatype and shape, and a
 * {@link ClientError} for BYTES that are not UTF-8 asked for as JSON.
 */
export function encodeTensor(tensor: V2Tensor, role: TensorRole, binary: boolean): { json: Record<string, unknown>; part?: Uint8Array } {
  const where = `${role} '${tensor.name}'`;
  checkTensor(where, tensor);
  const { name, datatype, shape, parameters, data } = tensor;
  if (!binary) return { json: { name, datatype, shape, ...withoutBinarySize(parameters), data: writeJsonData(where, datatype, data) } };
  const part = writeBinaryData(data);
  return { json: { name, datatype, shape, parameters: { ...parameters, binary_data_size: part.byteLength } }, part };
}
