/** A count and a sum of durations, in nanoseconds as Triton reports them. */
interface Duration {
  count: number;
  ns: number;
}

const NS_PER_MS = 1e6;

function add(duration: Duration, ms: number): void {
  duration.count++;
  duration.ns += Math.round(ms * NS_PER_MS);
}

/**
 * What a model version has served, summed as `GET /v2/models/{m}/stats` reports it in Triton's
 * statistics shape. Compute time is a batch's round trip to its worker (decode, run and encode
 * included), so `compute_input` and `compute_output` stay zero.
 */
export class ModelStats {
  readonly #success: Duration = { count: 0, ns: 0 };
  readonly #fail: Duration = { count: 0, ns: 0 };
  readonly #queue: Duration = { count: 0, ns: 0 };
  readonly #infer: Duration = { count: 0, ns: 0 };
  readonly #batches = new Map<number, Duration>();
  #inferences = 0;
  #executions = 0;
  #last = 0;

  /** A request left the queue after `ms`. */
  queued(ms: number): void {
    add(this.#queue, ms);
  }

  /** A batch of `size` requests took `ms` in a worker. */
  batch(size: number, ms: number): void {
    this.#executions++;
    this.#inferences += size;
    this.#last = Date.now();
    add(this.#infer, ms);
    let bucket = this.#batches.get(size);
    if (bucket === undefined) this.#batches.set(size, (bucket = { count: 0, ns: 0 }));
    add(bucket, ms);
  }

  /** A request was answered after `ms` from its arrival. */
  succeeded(ms: number): void {
    add(this.#success, ms);
  }

  /** A request failed after `ms` from its arrival. */
  failed(ms: number): void {
    add(this.#fail, ms);
  }

  /** One entry of Triton's `model_stats` array. */
  report(name: string, version: string): Record<string, unknown> {
    const zero = { count: 0, ns: 0 };
    return {
      name,
      version,
      last_inference: this.#last,
      inference_count: this.#inferences,
      execution_count: this.#executions,
      inference_stats: {
        success: { ...this.#success },
        fail: { ...this.#fail },
        queue: { ...this.#queue },
        compute_input: zero,
        compute_infer: { ...this.#infer },
        compute_output: zero,
      },
      batch_stats: [...this.#batches.entries()]
        .sort(([a], [b]) => a - b)
        .map(([size, d]) => ({ batch_size: size, compute_input: zero, compute_infer: { ...d }, compute_output: zero })),
    };
  }
}
