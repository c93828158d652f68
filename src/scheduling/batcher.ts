/** When queued items leave as a batch. */
export interface BatchPolicy {
  /** Largest batch; a full batch leaves at once. */
  readonly maxBatchSize: number;
  /** How long the oldest queued item may wait for the batch to fill, in ms. */
  readonly maxWaitMs: number;
}

/** Send this many items now, or wake up at `wakeAt` (same clock as the inputs) and ask again. */
export type BatchDecision = { readonly send: number } | { readonly wakeAt: number };

/**
 * The batching rule, free of I/O and of any clock of its own: a free worker takes up to
 * `maxBatchSize` queued items; a full batch leaves at once; a partial one leaves when the oldest
 * item has waited `maxWaitMs`.
 *
 * @param queued live items in the queue (at least 1)
 * @param oldestArrival when the oldest of them entered the queue
 * @param now the current time, on the same clock
 */
export function decideBatch(queued: number, oldestArrival: number, now: number, policy: BatchPolicy): BatchDecision {
  if (queued >= policy.maxBatchSize) return { send: policy.maxBatchSize };
  const wakeAt = oldestArrival + policy.maxWaitMs;
  return now >= wakeAt ? { send: queued } : { wakeAt };
}
