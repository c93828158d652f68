/** Shapes: a tensor's size in each dimension, and a model's, where a dimension may be dynamic. */

/** True when a dimension of a model's shape is dynamic (named, or of unknown size). */
export function isDynamic(dim: number | string): boolean {
  return typeof dim !== "number" || dim < 0;
}

/** A shape as people write it: `[batch, 64]`. */
export function formatShape(shape: readonly (number | string)[]): string {
  return `[${shape.join(", ")}]`;
}

/**
 * The number of elements of a shape: the product of its dimensions (1 for a scalar); with `from`
 * and `to`, of the dimensions from `from` up to `to`.
 */
export function elementCount(shape: readonly number[], from = 0, to = shape.length): number {
  let count = 1;
  for (let i = from; i < to; i++) count *= shape[i]!;
  return count;
}
