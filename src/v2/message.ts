/** What V2 requests and responses share: their tensor lists and their optional fields. */
import { ClientError } from "../errors.js";
import type { RequestLimits } from "../limits.js";
import { ElementBudget } from "../tensor/element-budget.js";
import type { BinaryTail } from "./binary.js";
import { describe } from "./json-data.js";
import { decodeTensor, encodeTensor, isObject, type TensorRole } from "./tensor.js";
import type { V2Tensor } from "./types.js";

/** The first name that appears twice in `names`, if any. */
export function duplicate(names: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

/**
 * Decodes a message's list of tensors (`field`, "inputs" or "outputs"), taking binary data from
 * `tail` in order and elements from `limits`, all tensors together, and checks that the binary
 * data is used up and no name appears twice.
 */
export function decodeTensors(list: unknown, field: string, role: TensorRole, tail: BinaryTail, maxElements: number, limits: RequestLimits): V2Tensor[] {
  if (!Array.isArray(list)) throw new ClientError(`"${field}" must be a list of tensors; got ${describe(list)}`);
  const budget = new ElementBudget(limits);
  const tensors = list.map((value, i) => decodeTensor(value, role, i, tail, maxElements, budget));
  tail.finish();
  const twice = duplicate(tensors.map((tensor) => tensor.name));
  if (twice !== undefined) throw new ClientError(`${role} '${twice}' appears twice`);
  return tensors;
}

/**
 * Encodes a message's tensors for its JSON header, the one at index i as binary data when
 * `binaryAt(i)`; `parts` are the binary data to send after the header, in order.
 */
export function encodeTensors(tensors: readonly V2Tensor[], role: TensorRole, binaryAt: (index: number) => boolean): { json: Record<string, unknown>[]; parts: Uint8Array[] } {
  const parts: Uint8Array[] = [];
  const json = tensors.map((tensor, i) => {
    const encoded = encodeTensor(tensor, role, binaryAt(i));
    if (encoded.part !== undefined) parts.push(encoded.part);
    return encoded.json;
  });
  return { json, parts };
}

/** A message's optional string field (`id`, `model_version`). */
export function optionalString(where: string, key: string, value: unknown): string | undefined {
  if (value === undefined || typeof value === "string") return value;
  throw new ClientError(`${where}: "${key}" must be a string; got ${describe(value)}`);
}

/** A message's or a requested output's optional `parameters`, with its boolean `flag` checked. */
export function optionalParameters(where: string, value: unknown, flag?: string): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) throw new ClientError(`${where}: parameters must be an object; got ${describe(value)}`);
  if (flag !== undefined && value[flag] !== undefined && typeof value[flag] !== "boolean") {
    throw new ClientError(`${where}: parameters.${flag} must be true or false; got ${describe(value[flag])}`);
  }
  return value;
}

/** `fields` without those that are undefined, so that optional fields left out stay out. */
export function defined<T extends object>(fields: T): T {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as T;
}
