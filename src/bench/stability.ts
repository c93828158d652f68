/**
 * When a level of a sweep has been measured long enough, as Triton's perf_analyzer decides it: the
 * last three windows agree, each window's throughput and mean latency within `tolerance` (a
 * fraction) of the three's average.
 */

/** What stability looks at in a window. */
export interface WindowFigures {
  requestsPerSec: number;
  meanMs: number;
}

/** How many consecutive windows must agree. */
export const STABLE_WINDOWS = 3;

/** Whether the last {@link STABLE_WINDOWS} windows agree within `tolerance`. A window with no answer never does. */
export function stable(windows: readonly WindowFigures[], tolerance: number): boolean {
  if (windows.length < STABLE_WINDOWS) return false;
  const last = windows.slice(-STABLE_WINDOWS);
  const within = (values: number[]) => {
    if (!values.every((v) => Number.isFinite(v) && v > 0)) return false;
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    return values.every((v) => Math.abs(v - mean) <= tolerance * mean);
  };
  return within(last.map((w) => w.requestsPerSec)) && within(last.map((w) => w.meanMs));
}
