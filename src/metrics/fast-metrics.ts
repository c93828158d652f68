/**
 * A counter and a histogram for the series every request touches, registered in the server's one
 * prom-client registry and exposed exactly as prom-client's own. They differ in one thing: a
 * series is an object of its own, found once, and counting on it is an addition. prom-client
 * validates and hashes the labels on every call, even through a child from `labels()`, which
 * cost a few per cent of a request's CPU on the HTTP thread.
 */
import type { MetricValueWithName, Registry } from "prom-client";

type Labels = Record<string, string>;

// A metric as prom-client's registry reads it at run time (its typings name the type by an enum,
// the registry by the exposition's word).
interface Exposed {
  name: string;
  help: string;
  type: "counter" | "histogram";
  values: MetricValueWithName<string>[];
  aggregator: "sum";
}

/** One series of a {@link FastCounter}. */
export class CounterSeries {
  value = 0;
  constructor(readonly labels: Labels) {}

  inc(by = 1): void {
    this.value += by;
  }
}

/** An OpenMetrics exemplar: the labels (a trace id) of one observation, its value and when (seconds since the epoch). */
export interface Exemplar {
  labelSet: Readonly<Labels>;
  value: number;
  timestamp: number;
}

/** One series of a {@link FastHistogram}. */
export class HistogramSeries {
  sum = 0;
  count = 0;
  // Observations in each bucket alone (not yet cumulative); the last is +Inf's.
  readonly buckets: number[];
  // The latest exemplar of each bucket; made at the first, so a series never given one holds none.
  exemplars: (Exemplar | undefined)[] | undefined;

  constructor(
    readonly labels: Labels,
    readonly bounds: readonly number[],
  ) {
    this.buckets = new Array<number>(bounds.length + 1).fill(0);
  }

  /** Counts `value`; returns the index of its bucket. */
  observe(value: number): number {
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.buckets[i]!++;
    this.sum += value;
    this.count++;
    return i;
  }

  /** Counts `value`, and keeps `labelSet` (e.g. its trace id) as its bucket's exemplar. */
  observeWithExemplar(value: number, labelSet: Readonly<Labels>): void {
    const i = this.observe(value);
    (this.exemplars ??= new Array<Exemplar | undefined>(this.buckets.length))[i] = { labelSet, value, timestamp: Date.now() / 1000 };
  }
}

/** What both share: a name, help, label names, and a series per label values, made once. */
abstract class FastMetric<S extends { labels: Labels }> {
  readonly aggregator = "sum" as const;
  abstract readonly type: Exposed["type"];
  readonly #series = new Map<string, S>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  /** The series of these labels (a label may be left out): look it up once and keep it. */
  series(labels: Labels): S {
    const key = this.labelNames.map((name) => labels[name] ?? "").join("\u0000");
    let series = this.#series.get(key);
    if (series === undefined) this.#series.set(key, (series = this.make({ ...labels })));
    return series;
  }

  protected abstract make(labels: Labels): S;
  protected abstract values(series: S): MetricValueWithName<string>[];

  /** The series as prom-client's registry reads a metric. */
  async get(): Promise<Exposed> {
    const values: MetricValueWithName<string>[] = [];
    for (const series of this.#series.values()) values.push(...this.values(series));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** What prom-client's `Registry.resetMetrics()` calls on every metric it holds. */
  reset(): void {
    this.#series.clear();
  }
}

/** A Prometheus counter whose series count with one addition. */
export class FastCounter extends FastMetric<CounterSeries> {
  readonly type = "counter";

  protected make(labels: Labels): CounterSeries {
    return new CounterSeries(labels);
  }

  protected values(series: CounterSeries): MetricValueWithName<string>[] {
    return [{ labels: series.labels, value: series.value }];
  }
}

/** A Prometheus histogram whose series observe without a label lookup. */
export class FastHistogram extends FastMetric<HistogramSeries> {
  readonly type = "histogram";

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    /** Upper bounds of the buckets, ascending; +Inf is added. */
    readonly bounds: readonly number[],
    registry: Registry,
  ) {
    super(name, help, labelNames, registry);
  }

  protected make(labels: Labels): HistogramSeries {
    return new HistogramSeries(labels, this.bounds);
  }

  protected values(series: HistogramSeries): MetricValueWithName<string>[] {
    const { labels, buckets, bounds, exemplars } = series;
    const out: (MetricValueWithName<string> & { exemplar?: Exemplar })[] = [];
    let cumulative = 0;
    for (let i = 0; i < bounds.length; i++) {
      cumulative += buckets[i]!;
      out.push({ labels: { le: bounds[i]!, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
    }
    out.push(
      { labels: { le: "+Inf", ...labels }, value: series.count, metricName: `${this.name}_bucket` },
      { labels, value: series.sum, metricName: `${this.name}_sum` },
      { labels, value: series.count, metricName: `${this.name}_count` },
    );
    // prom-client writes a value's exemplar in the OpenMetrics exposition only.
    if (exemplars !== undefined) {
      exemplars.forEach((exemplar, i) => {
        if (exemplar !== undefined) out[i]!.exemplar = exemplar;
      });
    }
    return out;
  }
}
