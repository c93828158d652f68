/** When queued items leave as a batch. */
export interface BatchPolicy {
  /** Largest batch; a full batch leaves at once. */
  readonly maxBatchSize: number;
  /** How long the oldest queued item may wait for the batch to fill, in ms; `"auto"`: chosen from the queue's latency model (latency-model.ts). */
  readonly maxWaitMs: number | "auto";
  /** Batch sizes that leave at once when that many are queued, as Triton's (sorted, ascending); empty: only `maxBatchSize`. */
  readonly preferredBatchSize?: readonly number[];
  /** Most cost one batch holds (its items' together); one item always goes. Unset: only the count bounds a batch. */
  readonly maxBatchCost?: number;
}

/** Send this many items now, or wake up at `wakeAt` (same clock as the inputs) and ask again. */
export type BatchDecision = { readonly send: number } | { readonly wakeAt: number };

/**
 * The batching rule, free of I/O and of any clock of its own: a free worker takes up to
 * `maxBatchSize` queued items; a full batch leaves at once, and so does one of the largest
 * preferred size that is queued; a partial one leaves when the oldest item has waited `waitMs`.
 *
 * @param queued live items in the queue (at least 1)
 * @param oldestArrival when the oldest of them entered the queue
 * @param now the current time, on the same clock
 * A queue that holds `maxBatchCost` or more is a full batch too: it leaves at once, as many
 * items as the budget takes (the queue counts them as it takes them).
 *
 * @param waitMs the wait of this decision: `maxWaitMs`, or the one "auto" chose
 * @param queuedCost the cost of the items queued, their `sizeOf`s together
 */
export function decideBatch(queued: number, oldestArrival: number, now: number, policy: BatchPolicy, waitMs = policy.maxWaitMs as number, queuedCost = 0): BatchDecision {
  if (queued >= policy.maxBatchSize || (policy.maxBatchCost !== undefined && queuedCost >= policy.maxBatchCost)) return { send: Math.min(queued, policy.maxBatchSize) };
  const preferred = policy.preferredBatchSize;
  if (preferred !== undefined) {
    for (let i = preferred.length - 1; i >= 0; i--) if (preferred[i]! <= queued) return { send: preferred[i]! };
  }
  const wakeAt = oldestArrival + waitMs;
  return now >= wakeAt ? { send: queued } : { wakeAt };
}
