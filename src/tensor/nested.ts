/**
 * Reading tensors given as nested lists (`[[1, 2], [3, 4]]` for a 2 × 2 tensor, a bare value for
 * a scalar) or as flat lists: their nesting checked against a shape, then their elements copied
 * into a flat array in row-major order. What each element may be is the caller's to say: a
 * protocol's rules for its datatype.
 */
import type { TypedArray } from "./datatypes.js";

/** One element as the array that holds it stores it; undefined when the value is not one of its type's. */
export type ElementReader = (value: unknown) => number | bigint | Uint8Array | undefined;

/** A bool element as every request gives it: true or 1, false or 0. */
export const readBool: ElementReader = (v) => (v === true || v === 1 ? 1 : v === false || v === 0 ? 0 : undefined);

/** Where lists are not nested as a shape says: the list (or single value) at `index`, where a list of `expected` values belongs. */
export interface NestingFault {
  index: number[];
  value: unknown;
  expected: number;
}

/** The shape that nested lists claim: the length of each level's first list. */
export function nestedShape(value: unknown): number[] {
  const shape: number[] = [];
  for (let v = value; Array.isArray(v); v = v[0]) shape.push(v.length);
  return shape;
}

/**
 * The first place where `value` is not lists nested as `shape`, down to the lists of elements
 * (whose elements {@link readElements} checks); undefined when there is none. It walks the lists
 * only, so that a few lists that claim a large shape are refused before an array of that shape
 * is made.
 */
export function findNestingFault(value: unknown, shape: readonly number[]): NestingFault | undefined {
  // The index being checked, one entry per level.
  const index: number[] = [];
  const walk = (v: unknown, depth: number): NestingFault | undefined => {
    if (!Array.isArray(v) || v.length !== shape[depth]) return { index: [...index], value: v, expected: shape[depth]! };
    if (depth === shape.length - 1) return undefined;
    for (let i = 0; i < v.length; i++) {
      index[depth] = i;
      const fault = walk(v[i], depth + 1);
      if (fault !== undefined) return fault;
    }
    index.length = depth;
    return undefined;
  };
  return shape.length === 0 ? undefined : walk(value, 0);
}

/**
 * Copies the elements of `value`, lists nested as `shape` (see {@link findNestingFault}; a flat
 * list is nested as `[its length]`), into `out` in row-major order, each through `read`. Throws
 * what `bad` makes of the first element that `read` refuses, given the element's index.
 *
 * `floatBound`, for an FP32 or FP64 `out`: numbers of a smaller magnitude are stored as they are,
 * without a call to `read`, which then only sees the others.
 */
export function readElements(
  value: unknown,
  shape: readonly number[],
  out: TypedArray | unknown[],
  read: ElementReader,
  bad: (index: readonly number[], value: unknown) => Error,
  floatBound?: number,
): void {
  const elements = out as unknown[];
  const floats = floatBound === undefined ? undefined : (out as Float32Array | Float64Array);
  const last = shape.length - 1;
  let at = 0;
  // The index being filled, one entry per level, for error messages.
  const index: number[] = [];
  const fill = (v: unknown, depth: number): void => {
    const list = v as unknown[];
    if (depth < last) {
      for (let i = 0; i < list.length; i++) {
        index[depth] = i;
        fill(list[i], depth + 1);
      }
      index.length = depth;
      return;
    }
    // A list of elements: this is most of reading a tensor.
    let i = floats === undefined ? 0 : floatRow(list, floats, at, floatBound!);
    for (; i < list.length; i++) {
      const element = read(list[i]);
      if (element === undefined) {
        index[depth] = i;
        throw bad(index, list[i]);
      }
      elements[at + i] = element;
    }
    at += list.length;
  };
  if (last >= 0) fill(value, 0);
  else {
    const element = read(value);
    if (element === undefined) throw bad(index, value);
    elements[0] = element;
  }
}

/**
 * Stores the numbers at the start of `list` of a magnitude below `bound` at `out[from...]`, in a
 * loop of its own, all in locals; returns the index of the first other element (or the length).
 */
function floatRow(list: readonly unknown[], out: Float32Array | Float64Array, from: number, bound: number): number {
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    if (!(typeof x === "number" && x < bound && x > -bound)) return i;
    out[from + i] = x;
  }
  return list.length;
}
