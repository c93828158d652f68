import { createRequire } from "node:module";
import type { Counter, CounterConfiguration, Gauge, GaugeConfiguration, Histogram, HistogramConfiguration, MetricObjectWithValues, MetricValue, Registry } from "prom-client";

// prom-client is loaded when a worker makes its first metric: most Workers make none, and it
// costs each worker thread about 2 MiB of heap. It is CommonJS, so it loads synchronously.
let promClient: typeof import("prom-client") | undefined;
const loadPromClient = () => (promClient ??= createRequire(import.meta.url)("prom-client") as typeof import("prom-client"));

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
  #registry: Registry | undefined;

  counter<L extends string>(config: Omit<CounterConfiguration<L>, "registers">): Counter<L> {
    return new (loadPromClient().Counter)({ ...config, registers: [this.#own()] });
  }

  gauge<L extends string>(config: Omit<GaugeConfiguration<L>, "registers">): Gauge<L> {
    return new (loadPromClient().Gauge)({ ...config, registers: [this.#own()] });
  }

  histogram<L extends string>(config: Omit<HistogramConfiguration<L>, "registers">): Histogram<L> {
    return new (loadPromClient().Histogram)({ ...config, registers: [this.#own()] });
  }

  /** The values of every metric made here; undefined while none is made. */
  async values(): Promise<MetricObjectWithValues<MetricValue<string>>[] | undefined> {
    if (this.#registry === undefined || this.#registry.getMetricsAsArray().length === 0) return undefined;
    return this.#registry.getMetricsAsJSON();
  }

  /**
   * Gives `send` the values of every metric made here every {@link REPORT_INTERVAL_MS}, once
   * there are any and whenever they changed; the returned function stops it.
   * @internal
   */
  report(send: (metrics: MetricObjectWithValues<MetricValue<string>>[]) => void): () => void {
    let last = "";
    const timer = setInterval(async () => {
      const metrics = await this.values();
      if (metrics === undefined) return;
      const text = JSON.stringify(metrics);
      if (text === last) return;
      last = text;
      send(metrics);
    }, REPORT_INTERVAL_MS).unref();
    return () => clearInterval(timer);
  }

  #own(): Registry {
    return (this.#registry ??= new (loadPromClient().Registry)());
  }
}

/** How often a worker reports its metrics, in ms: how stale `/metrics` may be for them. */
export const REPORT_INTERVAL_MS = 250;
