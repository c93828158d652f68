/**
 * A stage's or a model's running model of its forward time by batch size, and the decisions
 * made from it: when a new request would finish given the queue ahead of it (admission by
 * predicted latency), and how long a partial batch should wait (`maxWaitMs: "auto"`).
 * docs/scheduling.md states each rule.
 */

/** Batches seen before the model predicts anything: until then it admits everything and waits nothing. */
export const MIN_BATCHES = 4;
/** Each batch's weight against the ones before: the model follows a change of load within some tens of batches. */
const DECAY = 0.95;

/**
 * Forward time as `fixedMs + perItemMs × size`, fitted by least squares over batches seen, the
 * older ones weighing less (each batch's weight decays by {@link DECAY}): five numbers, however
 * long it serves. Until batches of two sizes were seen it cannot tell the fixed part from the
 * part per item, and takes the time as proportional to the size, which errs towards admitting.
 */
export class LatencyModel {
  #w = 0;
  #n = 0;
  #y = 0;
  #nn = 0;
  #ny = 0;
  #batches = 0;
  fixedMs = 0;
  perItemMs = 0;

  /** Whether it has seen enough batches to predict. */
  get ready(): boolean {
    return this.#batches >= MIN_BATCHES;
  }

  /** A batch of `size` items took `ms`, round trip included. */
  observe(size: number, ms: number): void {
    this.#w = this.#w * DECAY + 1;
    this.#n = this.#n * DECAY + size;
    this.#y = this.#y * DECAY + ms;
    this.#nn = this.#nn * DECAY + size * size;
    this.#ny = this.#ny * DECAY + size * ms;
    this.#batches++;
    const meanN = this.#n / this.#w;
    const meanY = this.#y / this.#w;
    const spread = this.#nn / this.#w - meanN * meanN;
    // A spread of a tenth of an item: batches of one size only, or nearly.
    const slope = spread > 0.1 ? (this.#ny / this.#w - meanN * meanY) / spread : meanY / meanN;
    // Neither part below 0: a noisy fit must not predict a bigger batch to be quicker than none.
    this.perItemMs = Math.max(0, Math.min(slope, meanY / meanN));
    this.fixedMs = Math.max(0, meanY - this.perItemMs * meanN);
  }

  /** The predicted forward time of a batch of `size`, in ms. */
  forwardMs(size: number): number {
    return this.fixedMs + this.perItemMs * size;
  }
}

/** What the queue looks like to a request about to join it. */
export interface QueueView {
  /** Requests that leave before it (of its level and higher ones). */
  readonly ahead: number;
  /** Workers that take from this queue. */
  readonly workers: number;
  readonly maxBatchSize: number;
}

/**
 * How long from now a request joining `view` would take to finish, in ms: the batches ahead of
 * it, `workers` at a time, each as long as the model says, and its own. What remains of the
 * batches at work now is left out (it is not known how far they are): the prediction errs
 * towards admitting.
 */
export function predictMs(model: LatencyModel, view: QueueView): number {
  const items = view.ahead + 1;
  const rounds = Math.ceil(items / (view.maxBatchSize * Math.max(1, view.workers)));
  return rounds * model.forwardMs(Math.min(view.maxBatchSize, items));
}

/**
 * Whether a request predicted to finish `predictedMs` from `now` can meet `deadline`; when it
 * cannot, how many seconds to tell its client to wait (`Retry-After`): about how long the queue
 * needs to drain enough for it, at least 1.
 */
export function retryAfter(predictedMs: number, now: number, deadline: number): number | undefined {
  const late = now + predictedMs - deadline;
  return late <= 0 ? undefined : Math.max(1, Math.ceil(late / 1000));
}

/** What {@link autoWaitMs} decides from. */
export interface WaitView {
  /** Items queued now. */
  readonly queued: number;
  /** Arrivals per ms, per worker that takes from the queue. */
  readonly ratePerMs: number;
  readonly maxBatchSize: number;
  /** Batch sizes preferred (sorted, ascending); empty: any. */
  readonly preferred: readonly number[];
  /** The most requests lately in the queue and at its workers, per worker; unset: no bound. */
  readonly present?: number;
}

/**
 * The batch size `maxWaitMs: "auto"` waits for: the smallest that keeps up with arrivals (while
 * a batch of n runs, `rate × forward(n)` more arrive, so a batch of n keeps up when n is at
 * least that, with a tenth to spare), rounded up to a preferred size; at most `maxBatchSize`.
 * Past what keeps up, a bigger batch only adds latency; below it, the queue grows without end.
 * Nor more than have lately been present, queued or at work (`present`).
 */
export function targetBatch(model: LatencyModel, view: WaitView): number {
  const load = view.ratePerMs * 1.1;
  const keepsUp = load * model.perItemMs >= 1 ? view.maxBatchSize : Math.ceil((load * model.fixedMs) / (1 - load * model.perItemMs));
  // No more can come than have lately been present: in a closed loop (clients that send again
  // when answered) arrivals follow the answers, and a batch larger than the clients never fills.
  let size = Math.min(view.maxBatchSize, Math.max(1, keepsUp), Math.max(1, Math.ceil(view.present ?? Infinity)));
  const preferred = view.preferred.find((p) => p >= size);
  if (preferred !== undefined) size = Math.min(view.maxBatchSize, preferred);
  return size;
}

/**
 * The wait `maxWaitMs: "auto"` gives a partial batch, in ms: the time its target size takes to
 * arrive at the present rate, at most one full batch's forward time (waiting longer never pays:
 * a worker would have run a batch in that time). 0 until the model is ready, or when the target
 * is already queued.
 */
export function autoWaitMs(model: LatencyModel, view: WaitView): number {
  if (!model.ready || view.ratePerMs <= 0) return 0;
  const missing = targetBatch(model, view) - view.queued;
  if (missing <= 0) return 0;
  return Math.min(missing / view.ratePerMs, model.forwardMs(view.maxBatchSize));
}

/**
 * The most requests lately present in a queue and at its workers: a high-water mark, raised at
 * each arrival and lowered by a twentieth at each batch taken, so it follows the load down
 * within some tens of batches.
 */
export class Presence {
  #peak = 0;

  /** A request joined; `count` are now queued or at work. */
  arrived(count: number): void {
    if (count > this.#peak) this.#peak = count;
  }

  /** A batch was taken. */
  took(): void {
    this.#peak *= 0.95;
  }

  get peak(): number {
    return this.#peak;
  }
}

/** A moving average of arrivals per ms, from the gaps between them: one number and a time. */
export class ArrivalRate {
  #gapMs = Infinity;
  #last = -Infinity;

  /** A request arrived at `now`. */
  arrived(now: number): void {
    const gap = now - this.#last;
    this.#last = now;
    if (!Number.isFinite(gap)) return;
    this.#gapMs = Number.isFinite(this.#gapMs) ? this.#gapMs + (gap - this.#gapMs) * 0.1 : gap;
  }

  /**
   * Arrivals per ms at `now`: a silence longer than the average gap and than `patienceMs` lowers
   * it. The patience is for clients that send again when answered: they are silent while the
   * worker computes their batch, which is no fall of the load.
   */
  perMs(now: number, patienceMs = 0): number {
    const silence = now - this.#last;
    const gap = silence > patienceMs ? Math.max(this.#gapMs, silence) : this.#gapMs;
    return Number.isFinite(gap) && gap > 0 ? 1 / gap : Number.isFinite(gap) ? Infinity : 0;
  }
}
