/**
 * MessagePack bodies for plain routes (`application/msgpack`), with msgpackr as the server uses
 * it: plain maps and arrays, no msgpackr extensions. A tensor travels as `{ data, shape, type }`,
 * its data the elements' bytes (`bin`), as Shoal's ONNX routes take and answer it.
 */
import { Packr, Unpackr } from "msgpackr";
import { bytesOf, fromBytes } from "../tensor/bytes.js";
import { arrayOf, isTensorType, TENSOR_TYPES, type TensorType, type TypedArray } from "../tensor/datatypes.js";
import { ProtocolError } from "./errors.js";

const packr = new Packr({ useRecords: false, mapsAsObjects: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

/** A value as a MessagePack body. */
export function packBody(value: unknown): Uint8Array {
  return packr.pack(value);
}

/** A MessagePack body's value. */
export function unpackBody(body: Uint8Array): unknown {
  try {
    return unpackr.unpack(body);
  } catch (err) {
    throw new ProtocolError(`the answer is not MessagePack: ${(err as Error).message}`);
  }
}

/** A tensor as MessagePack carries it: its elements' bytes, its shape, its element type (`float32`, `int64`, ...). */
export interface PackedTensor {
  data: Uint8Array;
  shape: number[];
  type: TensorType;
}

/** A typed array as a {@link PackedTensor}: its bytes are a view, not a copy; a Uint8Array is `uint8` unless `type` says `bool`. */
export function packTensor(data: TypedArray, shape: number[] = [data.length], type?: TensorType): PackedTensor {
  const told = type ?? (data instanceof Uint8Array ? "uint8" : TENSOR_TYPES.find((t) => t !== "bool" && arrayOf(t) === data.constructor));
  if (told === undefined) throw new TypeError(`a ${data.constructor.name} holds no tensor type`);
  return { data: bytesOf(data), shape, type: told };
}

/** The elements of a {@link PackedTensor} an answer held, as a view of its bytes where they are aligned. */
export function unpackTensor(value: unknown): { data: TypedArray; shape: number[]; type: TensorType } {
  const tensor = value as Partial<PackedTensor> | null;
  if (tensor === null || typeof tensor !== "object" || !(tensor.data instanceof Uint8Array) || !Array.isArray(tensor.shape) || typeof tensor.type !== "string" || !isTensorType(tensor.type)) {
    throw new ProtocolError("a MessagePack tensor is { data: <bytes>, shape: [...], type: 'float32' | ... }");
  }
  return { data: fromBytes(arrayOf(tensor.type), tensor.data, true), shape: tensor.shape, type: tensor.type };
}
