/**
 * The default bucket bounds of the histograms, apart from the registry so that the config loader
 * can name them without loading prom-client (the public API loads the config in every worker).
 */

/** Seconds; from half a millisecond to half a minute, so both 1 ms and 10 s workloads read well. */
export const LATENCY_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Items per batch: powers of two up to 1024. */
export const BATCH_BUCKETS: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** The bucket bounds of the histograms (`--latency-buckets`, `--batch-size-buckets`). */
export interface Buckets {
  /** Upper bounds of every duration histogram, in seconds, ascending. */
  readonly latency: readonly number[];
  /** Upper bounds of every batch-size histogram, ascending. */
  readonly batchSize: readonly number[];
}
