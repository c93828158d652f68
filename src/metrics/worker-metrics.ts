import { Counter, Gauge, Histogram, Registry, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from "prom-client";

/**
 * A worker's own Prometheus metrics. Metrics made here are reported to the coordinator every
 * {@link REPORT_INTERVAL_MS} and appear in the server's `/metrics` with `stage` and `worker`
 * labels. The returned objects are prom-client's, so `inc()`, `set()`, `observe()` and `labels()`
 * work as usual.
 *
 * @example
 * ```ts
 * class Model extends Worker {
 *   cacheHits = this.metrics.counter({ name: "model_cache_hits_total", help: "Cache hits" });
 *   forward(x: Input) { if (this.cache.has(x.key)) this.cacheHits.inc(); ... }
 * }
 * ```
 */
export class WorkerMetrics {
  readonly registry = new Registry();

  counter<L extends string>(config: Omit<CounterConfiguration<L>, "registers">): Counter<L> {
    return new Counter({ ...config, registers: [this.registry] });
  }

  gauge<L extends string>(config: Omit<GaugeConfiguration<L>, "registers">): Gauge<L> {
    return new Gauge({ ...config, registers: [this.registry] });
  }

  histogram<L extends string>(config: Omit<HistogramConfiguration<L>, "registers">): Histogram<L> {
    return new Histogram({ ...config, registers: [this.registry] });
  }
}

/** How often a worker reports its metrics, in ms: how stale `/metrics` may be for them. */
export const REPORT_INTERVAL_MS = 250;
