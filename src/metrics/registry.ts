import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from "prom-client";

/** Seconds; from half a millisecond to half a minute, so both 1 ms and 10 s workloads read well. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** What a stage records, bound to its label once at start-up so the hot path does no lookups. */
export interface StageMetrics {
  /** A batch of this many items was dispatched. */
  batch(size: number): void;
  /** An item waited this long in the queue, in ms. */
  queueWait(ms: number): void;
  /** A forward call took this long, IPC included, in ms. */
  forward(ms: number): void;
  /** A worker was replaced. */
  restart(): void;
  /** A worker reported its own metrics; `undefined` when it is gone. */
  workerReport(workerId: number, metrics: WorkerMetricsReport | undefined): void;
}

/** A worker's own metrics, as prom-client's `getMetricsAsJSON()` gives them. */
export type WorkerMetricsReport = MetricObjectWithValues<MetricValue<string>>[];

/** What a stage shows at scrape time. Read only when scraped, never updated per request. */
export interface StageGauges {
  readonly name: string;
  readonly queued: number;
  readonly liveWorkers: number;
}

/** A worker's own metrics as last reported, with the labels that say where they come from. */
interface WorkerSnapshot {
  labels: { stage: string; worker: string };
  metrics: WorkerMetricsReport;
}

/**
 * The one metric registry of a server: every metric name is defined here. Names take the
 * `--namespace` prefix; durations are in seconds, as Prometheus expects.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #requests: Counter<"route" | "code">;
  readonly #latency: Histogram<"route">;
  readonly #batchSize: Histogram<"stage">;
  readonly #queueWait: Histogram<"stage">;
  readonly #forward: Histogram<"stage">;
  readonly #restarts: Counter<"stage">;
  readonly #workers = new Map<string, WorkerSnapshot>();
  readonly #answers = new Map<string, { latency: Histogram.Internal<"route">; byCode: Map<number, Counter.Internal> }>();

  constructor(namespace: string, stages: () => readonly StageGauges[], inFlight: () => number, bytesInFlight: () => number) {
    const name = (n: string) => `${namespace}_${n}`;
    const registers = [this.registry];
    this.#requests = new Counter({ name: name("requests_total"), help: "Requests answered, by route and status code", labelNames: ["route", "code"], registers });
    this.#latency = new Histogram({ name: name("request_duration_seconds"), help: "Time from a request's arrival to its answer", labelNames: ["route"], buckets: LATENCY_BUCKETS, registers });
    new Gauge({
      name: name("requests_in_flight"),
      help: "Requests accepted and not yet answered",
      registers,
      collect() {
        this.set(inFlight());
      },
    });
    new Gauge({
      name: name("request_bytes_in_flight"),
      help: "Request body bytes held, from the start of reading a body until its request is answered (--max-inflight-bytes is the most)",
      registers,
      collect() {
        this.set(bytesInFlight());
      },
    });
    new Gauge({
      name: name("stage_queue_depth"),
      help: "Items waiting in a stage's queue",
      labelNames: ["stage"],
      registers,
      collect() {
        for (const s of stages()) this.set({ stage: s.name }, s.queued);
      },
    });
    new Gauge({
      name: name("stage_live_workers"),
      help: "Workers of a stage that are started and alive",
      labelNames: ["stage"],
      registers,
      collect() {
        for (const s of stages()) this.set({ stage: s.name }, s.liveWorkers);
      },
    });
    this.#batchSize = new Histogram({ name: name("stage_batch_size"), help: "Items per batch sent to a worker", labelNames: ["stage"], buckets: BATCH_BUCKETS, registers });
    this.#queueWait = new Histogram({ name: name("stage_queue_wait_seconds"), help: "Time an item waited in a stage's queue", labelNames: ["stage"], buckets: LATENCY_BUCKETS, registers });
    this.#forward = new Histogram({ name: name("stage_forward_duration_seconds"), help: "Time of one forward call, IPC included", labelNames: ["stage"], buckets: LATENCY_BUCKETS, registers });
    this.#restarts = new Counter({ name: name("stage_worker_restarts_total"), help: "Workers replaced after dying or overrunning", labelNames: ["stage"], registers });
  }

  /** The recorder for one stage. */
  stage(stage: string): StageMetrics {
    const batch = this.#batchSize.labels(stage);
    const wait = this.#queueWait.labels(stage);
    const forward = this.#forward.labels(stage);
    const restarts = this.#restarts.labels(stage);
    // Create the series now, so a stage that has not restarted shows 0 rather than nothing.
    restarts.inc(0);
    return {
      batch: (size) => batch.observe(size),
      queueWait: (ms) => wait.observe(ms / 1000),
      forward: (ms) => forward.observe(ms / 1000),
      restart: () => restarts.inc(),
      workerReport: (workerId, metrics) => this.workerReport(stage, workerId, metrics),
    };
  }

  /** A request to `route` was answered with `code` after `ms`. */
  answered(route: string, code: number, ms: number): void {
    // Children are looked up once per route and code: prom-client hashes the labels on every
    // call otherwise, which shows on the request path.
    let children = this.#answers.get(route);
    if (children === undefined) {
      children = { latency: this.#latency.labels(route), byCode: new Map() };
      this.#answers.set(route, children);
    }
    let count = children.byCode.get(code);
    if (count === undefined) {
      count = this.#requests.labels(route, String(code));
      children.byCode.set(code, count);
    }
    count.inc();
    children.latency.observe(ms / 1000);
  }

  /** Keeps a worker's latest report of its own metrics; `undefined` forgets the worker. */
  workerReport(stage: string, workerId: number, metrics: WorkerMetricsReport | undefined): void {
    const key = `${stage}/${workerId}`;
    if (metrics === undefined) this.#workers.delete(key);
    else this.#workers.set(key, { labels: { stage, worker: String(workerId) }, metrics });
  }

  /** The exposition text: the server's metrics, then every worker's with `stage` and `worker` labels. */
  async text(): Promise<string> {
    if (this.#workers.size === 0) return this.registry.metrics();
    const labelled = [...this.#workers.values()].map(({ labels, metrics }) =>
      metrics.map((m) => ({ ...m, values: m.values.map((v) => ({ ...v, labels: { ...v.labels, ...labels } })) })),
    );
    return Registry.merge([this.registry, AggregatorRegistry.aggregate(labelled)]).metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
