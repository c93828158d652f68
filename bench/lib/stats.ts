/** Small statistics over a handful of benchmark rounds. */

/** The median (mean of the two middle values for an even count); NaN for an empty list. */
export function median(values: readonly number[]): number {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return NaN;
  const mid = xs.length >> 1;
  return xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median and range of the finite values. */
export function spread(values: readonly number[]): Spread {
  const xs = values.filter((v) => Number.isFinite(v));
  return {
    median: median(xs),
    min: xs.length > 0 ? Math.min(...xs) : NaN,
    max: xs.length > 0 ? Math.max(...xs) : NaN,
    n: xs.length,
  };
}

/** Sum of a list. */
export function sum(values: readonly number[]): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

/** The `p`th percentile (nearest rank) of the values; NaN for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
