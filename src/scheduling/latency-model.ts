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
  readonly maxBatchSize: number;
  /** The most requests lately in the queue and at its workers, per worker ({@link Presence}). */
  readonly present: number;
  /** In how many ms the requests after the last batch's answers are expected to be back ({@link ReturnLag}). */
  readonly backMs: number;
}

/**
 * The wait `maxWaitMs: "auto"` gives a partial batch, in ms, counted from when a free worker
 * found it partial. While fewer are queued (q) than have lately been present (c), and the
 * requests after the last batch's answers are expected back within it: the wait after which one
 * batch of p = min(maxBatchSize, c) still costs less an item than sending q now and the
 * r = min(maxBatchSize, c − q) still missing in a second batch, `(fixed + wait) / p < 2·fixed /
 * (q + r)`, so `fixed × (2p / (q + r) − 1)`: the fixed part when all fit in one batch, less when
 * they do not; at most one full batch's forward time. Otherwise, and until the model is ready, 0.
 *
 * Clients that send again when answered (a closed loop) are its case: their rate is the
 * throughput itself, so that any batch "keeps up" and a rule by rate lets them settle into split
 * batches that each pay the fixed part; those not queued are on their way back, and waiting a
 * little for them is cheaper than the second batch. When they are back later than that, waiting
 * would only idle the worker. Arrivals at a rate of their own, spread over the whole time between
 * batches, are not waited for: the worker takes what came while it was busy.
 */
export function autoWaitMs(model: LatencyModel, view: WaitView): number {
  const clients = Math.ceil(view.present);
  if (!model.ready || clients <= view.queued) return 0;
  const full = Math.min(view.maxBatchSize, clients);
  const worth = Math.min(model.fixedMs * ((2 * full) / Math.min(view.queued + view.maxBatchSize, clients) - 1), model.forwardMs(view.maxBatchSize));
  return view.backMs < worth ? worth : 0;
}

/** Batches over which {@link Presence} keeps its high-water mark. */
const PRESENCE_BATCHES = 4;

/**
 * The most requests lately present in a queue and at its workers: the highest count seen at an
 * arrival over the last {@link PRESENCE_BATCHES} batches taken. In a closed loop every client is
 * back within a batch or two, so the mark holds the number of clients; when the load falls it
 * follows within those few batches (a slower fall would keep "auto" waiting for clients gone).
 */
export class Presence {
  readonly #peaks = new Array<number>(PRESENCE_BATCHES).fill(0);
  #at = 0;

  /** A request joined; `count` are now queued or at work. */
  arrived(count: number): void {
    if (count > this.#peaks[this.#at]!) this.#peaks[this.#at] = count;
  }

  /** A batch was taken. */
  took(): void {
    this.#at = (this.#at + 1) % PRESENCE_BATCHES;
    this.#peaks[this.#at] = 0;
  }

  get peak(): number {
    return Math.max(...this.#peaks);
  }
}

/**
 * When the requests that follow a batch's answers are back: how long after the answers the first
 * comes and how far the last is behind it, moving averages over the requests that came between
 * one batch's answers and the next's. In a closed loop that is the clients' round trip and how
 * spread their burst is; at a rate of its own, about a gap and the whole time between batches.
 */
export class ReturnLag {
  #lagMs = 0;
  #spreadMs = 0;
  #landedAt = -Infinity;
  #first = NaN;
  #last = NaN;

  /** A batch came back at `now`. */
  landed(now: number): void {
    if (!Number.isNaN(this.#first)) {
      this.#lagMs += (this.#first - this.#landedAt - this.#lagMs) * 0.2;
      this.#spreadMs += (this.#last - this.#first - this.#spreadMs) * 0.2;
    }
    this.#landedAt = now;
    this.#first = NaN;
  }

  /** A request arrived at `now`. */
  arrived(now: number): void {
    if (this.#landedAt === -Infinity) return;
    if (Number.isNaN(this.#first)) this.#first = now;
    this.#last = now;
  }

  /** In how many ms from `now` the requests after the last batch's answers are expected to be back (0: by now). */
  backMs(now: number): number {
    return Math.max(0, this.#landedAt + this.#lagMs + this.#spreadMs - now);
  }
}
