/**
 * The V2 gRPC messages as proto-loader gives them (`protos.ts`'s options), and what turns their
 * parameters and typed contents into the V2 REST body's: pure, shared by the server's gRPC door
 * and the package's gRPC client.
 */
import { ClientError } from "../errors.js";
import { bytesOf } from "../tensor/bytes.js";
import { isV2Datatype, typedArrayFor, type NumericDatatype, type TypedArray, type V2Datatype } from "../tensor/datatypes.js";
import { writeBinaryData } from "../v2/binary.js";

/** A parameter's value as proto-loader gives it (`oneofs: true`, 64-bit integers as strings). */
export interface ParameterMessage {
  parameter_choice?: "bool_param" | "int64_param" | "string_param" | "double_param" | "uint64_param";
  bool_param?: boolean;
  int64_param?: string;
  string_param?: string;
  double_param?: number;
  uint64_param?: string;
}

/** The typed contents of a tensor. */
export interface ContentsMessage {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: string[];
  uint_contents: number[];
  uint64_contents: string[];
  fp32_contents: number[];
  fp64_contents: number[];
  bytes_contents: Uint8Array[];
}

/** An input of a ModelInferRequest or an output of a ModelInferResponse. */
export interface TensorMessage {
  name: string;
  datatype: string;
  shape: (string | number)[];
  parameters: Record<string, ParameterMessage>;
  contents?: ContentsMessage | null;
}

/** The fields of a ModelInferRequest. */
export interface InferRequestFields {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, ParameterMessage>;
  inputs: TensorMessage[];
  outputs: { name: string; parameters: Record<string, ParameterMessage> }[];
  raw_input_contents: Uint8Array[];
}

/** A ModelInferResponse, as proto-loader encodes it. */
export interface InferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, ParameterMessage>;
  outputs: { name: string; datatype: string; shape: (string | number)[]; parameters: Record<string, ParameterMessage>; contents?: ContentsMessage | null }[];
  raw_output_contents: Uint8Array[];
}

// The typed contents field of each datatype; FP16 has none (raw contents only).
const CONTENTS: Record<V2Datatype, keyof ContentsMessage | undefined> = {
  BOOL: "bool_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  FP16: undefined,
  FP32: "fp32_contents",
  FP64: "fp64_contents",
  BYTES: "bytes_contents",
};
const FIELDS = Object.keys({ bool_contents: 0, int_contents: 0, int64_contents: 0, uint_contents: 0, uint64_contents: 0, fp32_contents: 0, fp64_contents: 0, bytes_contents: 0 } satisfies Record<keyof ContentsMessage, 0>) as (keyof ContentsMessage)[];

/** Whether a tensor has any typed contents. */
export function hasContents(tensor: Pick<TensorMessage, "contents">): boolean {
  const contents = tensor.contents;
  return contents != null && FIELDS.some((f) => contents[f].length > 0);
}

/**
 * A tensor's typed contents laid out as raw contents (little-endian elements, BYTES elements
 * framed), `where` naming it in the {@link ClientError} thrown for contents in the wrong field or
 * out of the datatype's range (`raw`: the message's field of raw contents, for FP16).
 */
export function contentsBytes(tensor: TensorMessage, where: string, raw: "raw_input_contents" | "raw_output_contents"): Uint8Array {
  const { datatype } = tensor;
  if (!isV2Datatype(datatype)) throw new ClientError(`${where}: unknown datatype ${JSON.stringify(datatype.slice(0, 20))}`);
  const field = CONTENTS[datatype];
  const contents = tensor.contents;
  const other = contents == null ? undefined : FIELDS.find((f) => f !== field && contents[f].length > 0);
  if (other !== undefined) throw new ClientError(`${where} is ${datatype}: its elements go in ${field ?? raw}, not ${other}`);
  if (field === undefined || contents == null) return new Uint8Array(0);
  const values = contents[field];
  if (datatype === "BYTES") return writeBinaryData(values as Uint8Array[]);
  if (datatype === "BOOL") return Uint8Array.from(values as boolean[], (v) => (v ? 1 : 0));
  if (datatype === "INT64") return bytesOf(BigInt64Array.from(values as string[], (v) => BigInt(v)));
  if (datatype === "UINT64") return bytesOf(BigUint64Array.from(values as string[], (v) => BigInt(v)));
  const array = typedArrayFor(datatype as Exclude<NumericDatatype, "BOOL" | "INT64" | "UINT64">).from(values as number[]);
  if (datatype !== "FP32" && datatype !== "FP64") {
    const i = array.findIndex((v, at) => v !== values[at]);
    if (i >= 0) throw new ClientError(`${where}: element ${i} (${String(values[i])}) is out of the range of ${datatype}`);
  }
  return bytesOf(array);
}

/**
 * A tensor's elements as the typed contents of its datatype (64-bit integers as decimal strings,
 * as proto-loader takes them); undefined for FP16, which has no typed field.
 */
export function typedContents(datatype: V2Datatype, data: TypedArray | Uint8Array[]): Partial<ContentsMessage> | undefined {
  const field = CONTENTS[datatype];
  if (field === undefined) return undefined;
  if (datatype === "BYTES") return { bytes_contents: data as Uint8Array[] };
  const values = Array.from(data as TypedArray, (v: number | bigint) => (typeof v === "bigint" ? String(v) : datatype === "BOOL" ? v !== 0 : v));
  return { [field]: values };
}

/** Parameters as the V2 JSON body holds them: 64-bit integers as numbers while exact, else as decimal strings. */
export function parameters(map: Record<string, ParameterMessage>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name in map) {
    const p = map[name]!;
    const choice = p.parameter_choice;
    if (choice === undefined) continue;
    const value = p[choice];
    out[name] = choice === "int64_param" || choice === "uint64_param" ? exactNumber(value as string) : value;
  }
  return out;
}

function exactNumber(text: string): number | string {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}

/** JSON parameters as gRPC's: integers as int64, other numbers as double, anything else but a string as its JSON text. */
export function parameterMessages(values: Record<string, unknown>): Record<string, ParameterMessage> {
  const out: Record<string, ParameterMessage> = {};
  for (const name in values) {
    const v = values[name];
    if (typeof v === "boolean") out[name] = { bool_param: v };
    else if (typeof v === "number") out[name] = Number.isSafeInteger(v) ? { int64_param: String(v) } : { double_param: v };
    else if (typeof v === "string") out[name] = { string_param: v };
    else out[name] = { string_param: JSON.stringify(v) ?? String(v) };
  }
  return out;
}
