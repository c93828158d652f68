/**
 * Mosec's metric series, by the names and labels its Rust front gives them, kept in the server's
 * one registry beside Shoal's own for a server started by the Python SDK's `shoal.mosec`:
 * dashboards made for Mosec, and Mosec's own service tests, read them. Fed by the same calls
 * as Shoal's series (registry.ts); a server without them pays nothing.
 */
import { Gauge, type Registry } from "prom-client";
import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from "./fast-metrics.js";

/** What Mosec's series are named and bucketed by. */
export interface MosecSeriesOptions {
  /** Their prefix (Mosec's `--namespace`, `mosec_service` by default). */
  readonly namespace: string;
  /** The request deadline, in ms: the duration buckets double from 1 ms until they pass it, as Mosec's. */
  readonly timeoutMs: number;
}

/** Batch sizes as Mosec buckets them: powers of two up to 512. */
const BATCH_BUCKETS = Array.from({ length: 10 }, (_, k) => 2 ** k);

/** What one stage records in Mosec's series: its batches and forward calls, by worker (Mosec's `connection`). */
export interface MosecStage {
  batch(size: number, workerId: number): void;
  forward(ms: number, workerId: number): void;
}

/** Mosec's series in a registry. */
export class MosecSeries {
  readonly #throughput: FastCounter;
  readonly #duration: FastHistogram;
  readonly #batchSize: FastHistogram;
  // The whole request's duration, of those answered 200 (Mosec's stage and connection "total").
  readonly #total: HistogramSeries;
  readonly #answers = new Map<string, CounterSeries>();

  constructor(options: MosecSeriesOptions, registry: Registry, inFlight: () => number) {
    const name = (n: string) => `${options.namespace}_${n}`;
    const durations = Array.from({ length: Math.ceil(Math.log2(Math.max(2, options.timeoutMs))) + 1 }, (_, k) => 0.001 * 2 ** k);
    // Mosec's client library writes a counter with `_total` after its name.
    this.#throughput = new FastCounter(name("throughput_total"), "Requests answered, by status code and route (Mosec's name)", ["code", "endpoint"], registry);
    this.#duration = new FastHistogram(name("process_duration_second"), "Time of a request answered 200 (stage and connection \"total\"), and of each stage's forward calls by worker (Mosec's name)", ["stage", "connection"], durations, registry);
    this.#batchSize = new FastHistogram(name("batch_size"), "Items per batch of the stages that batch, by worker (Mosec's name)", ["stage", "connection"], BATCH_BUCKETS, registry);
    this.#total = this.#duration.series({ stage: "total", connection: "total" });
    new Gauge({
      name: name("remaining_task"),
      help: "Requests accepted and not yet answered (Mosec's name)",
      registers: [registry],
      collect() {
        this.set(inFlight());
      },
    });
  }

  /** A request to `endpoint` was answered with `code` after `ms`. */
  answered(endpoint: string, code: number, ms: number): void {
    const key = `${code} ${endpoint}`;
    let count = this.#answers.get(key);
    if (count === undefined) this.#answers.set(key, (count = this.#throughput.series({ code: String(code), endpoint })));
    count.inc();
    if (code === 200) this.#total.observe(ms / 1000);
  }

  /** The recorder of stage `stage`: its series by worker, found once each. */
  stage(stage: string): MosecStage {
    const batches: HistogramSeries[] = [];
    const forwards: HistogramSeries[] = [];
    const of = (series: HistogramSeries[], metric: FastHistogram, workerId: number) => (series[workerId] ??= metric.series({ stage, connection: String(workerId) }));
    return {
      batch: (size, workerId) => of(batches, this.#batchSize, workerId).observe(size),
      forward: (ms, workerId) => of(forwards, this.#duration, workerId).observe(ms / 1000),
    };
  }
}
