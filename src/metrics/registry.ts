import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from "./fast-metrics.js";
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from "prom-client";
import { BATCH_BUCKETS, LATENCY_BUCKETS, type Buckets } from "./buckets.js";
import { loadOf, type Load } from "./load-report.js";
import { OPENMETRICS_CONTENT_TYPE, openMetricsText } from "./openmetrics.js";
import { modelSeries } from "./model-series.js";
import { MosecSeries, type MosecSeriesOptions } from "./mosec-series.js";
import type { Phases, Protocol, StageMetrics, TenantOutcome, QueueOutcome, StreamMetrics, WorkerMetricsReport, QueueGauges, PoolGauges, ServerGauges, ModelGauges, ModelPartGauges, ModelLifecycle } from "./metric-types.js";

export type { Phases, Protocol, StageMetrics, TenantOutcome, QueueOutcome, StreamMetrics, WorkerMetricsReport, QueueGauges, PoolGauges, ServerGauges, ModelGauges, ModelPartGauges, ModelLifecycle };

/** Chunks per stream: from one to tens of thousands (tokens of a long generation). */
const CHUNK_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384];

/** The series of one route and protocol, found once. */
interface RouteSeries {
  latency: HistogramSeries;
  queue: HistogramSeries;
  fill: HistogramSeries;
  forward: HistogramSeries;
  batch: HistogramSeries;
  byCode: Map<number, CounterSeries>;
}

/** Whose series a stage's or a model's metrics are: `{ stage }` or `{ model }`. */
type Owner = { stage: string } | { model: string };

/** A worker's own metrics as last reported, with the labels that say where they come from. */
interface WorkerSnapshot {
  labels: Owner & { worker: string };
  metrics: WorkerMetricsReport;
}

/**
 * The one metric registry of a server: every metric name is defined here (Mosec's, for a server
 * that shoal.mosec started, in mosec-series.ts). Names take the
 * `--namespace` prefix; durations are in seconds, as Prometheus expects.
 */
export class Metrics {
  readonly registry = new Registry();
  // The series every request or batch touches: counted without prom-client's label lookups.
  readonly #requests: FastCounter;
  readonly #latency: FastHistogram;
  readonly #batchSize: FastHistogram;
  readonly #queueWait: FastHistogram;
  readonly #forward: FastHistogram;
  readonly #retries: Counter<"stage" | "model">;
  readonly #restarts: Counter<"stage">;
  readonly #subItems: Counter<"route" | "stage">;
  readonly #firstChunk: Histogram<"route">;
  readonly #chunkInterval: FastHistogram;
  // A request's phases, by route: where its time went, and the batch it went in.
  readonly #phaseQueue: FastHistogram;
  readonly #phaseFill: FastHistogram;
  readonly #phaseForward: FastHistogram;
  readonly #phaseBatch: FastHistogram;
  readonly #chunks: Histogram<"route">;
  readonly #activeStreams: Gauge<"route">;
  readonly #cancelled: Counter<"route" | "reason">;
  readonly #queueOutcomes: Counter<"stage" | "model" | "level" | "outcome">;
  readonly #requestsCancelled: Counter<"by">;
  readonly #predicted: Histogram<"stage" | "model">;
  readonly #actual: Histogram<"stage" | "model">;
  readonly #chosenWait: Gauge<"stage" | "model">;
  readonly #tenants: Counter<"stage" | "model" | "tenant" | "outcome">;
  readonly #cache: Counter<"route" | "result">;
  readonly #streamRecorders = new Map<string, StreamMetrics>();
  readonly #workers = new Map<string, WorkerSnapshot>();
  readonly #answers = new Map<string, RouteSeries>();
  readonly #gauges: ServerGauges;
  readonly #lifecycle: (model: string, version: string) => ModelLifecycle;
  // Mosec's series too, for a server started by shoal.mosec.
  readonly #mosec: MosecSeries | undefined;

  constructor(namespace: string, gauges: ServerGauges, buckets: Buckets = { latency: LATENCY_BUCKETS, batchSize: BATCH_BUCKETS }, mosec?: MosecSeriesOptions) {
    const { latency: latencyBuckets, batchSize: batchBuckets } = buckets;
    this.#gauges = gauges;
    const name = (n: string) => `${namespace}_${n}`;
    const registers = [this.registry];
    this.#requests = new FastCounter(name("requests_total"), "Requests answered, by route, status code (a gRPC answer's is the HTTP status of the same error) and protocol", ["route", "code", "protocol"], this.registry);
    this.#latency = new FastHistogram(name("request_duration_seconds"), "Time from a request's arrival to its answer", ["route", "protocol"], latencyBuckets, this.registry);
    new Gauge({
      name: name("requests_in_flight"),
      help: "Requests accepted and not yet answered",
      registers,
      collect() {
        this.set(gauges.inFlight());
      },
    });
    new Gauge({
      name: name("request_bytes_in_flight"),
      help: "Request body bytes held, from the start of reading a body until its request is answered (--max-inflight-bytes is the most)",
      registers,
      collect() {
        this.set(gauges.bytesInFlight());
      },
    });
    // A stage's or a model version's queue, read at each scrape and set afresh, so a model that is
    // gone leaves no series behind.
    const perQueue = (metric: string, help: string, read: (q: QueueGauges) => number) =>
      new Gauge({
        name: name(metric),
        help,
        labelNames: ["stage", "model"],
        registers,
        collect() {
          this.reset();
          for (const s of gauges.stages()) this.set({ stage: s.name }, read(s));
          for (const m of gauges.models()) this.set({ model: m.name }, read(m));
        },
      });
    perQueue("stage_queue_depth", "Items waiting in the queue of a stage, or of a model version of the shared pool", (q) => q.queued);
    perQueue("queue_behind_seconds", "How long the next item to leave a stage's or a model's queue has waited: how far behind the server is (the metric to scale on, docs/observability.md)", (q) => q.behindMs / 1000);
    perQueue("stage_running", "Items of a stage's, or of a model version's, batches at workers now: the running requests (the queued ones are stage_queue_depth)", (q) => q.running);
    perQueue("stage_live_workers", "Workers of a stage, or of the shared pool that hold a model version, started and alive", (q) => q.liveWorkers);
    new Gauge({
      name: name("stage_workers_backing_off"),
      help: "Worker slots of a stage, or of the shared pool (stage=\"models\"), waiting out a back-off after their worker died",
      labelNames: ["stage"],
      registers,
      collect() {
        for (const p of gauges.pools()) this.set({ stage: p.name }, p.backingOff);
      },
    });
    this.#batchSize = new FastHistogram(name("stage_batch_size"), "Items per batch sent to a worker", ["stage", "model"], batchBuckets, this.registry);
    this.#queueWait = new FastHistogram(name("stage_queue_wait_seconds"), "Time an item waited in a stage's or a model's queue", ["stage", "model"], latencyBuckets, this.registry);
    this.#forward = new FastHistogram(name("stage_forward_duration_seconds"), "Time of one forward call, IPC included", ["stage", "model"], latencyBuckets, this.registry);
    this.#retries = new Counter({ name: name("stage_batch_retry_runs_total"), help: "forward() runs made again on parts of batches that failed as a whole, to find the items at fault", labelNames: ["stage", "model"], registers });
    this.#subItems = new Counter({ name: name("stage_sub_items_total"), help: "Sub-items made by a stage's fan-outs, by route: each is an item of its own in the stages up to the one that gathers them", labelNames: ["route", "stage"], registers });
    this.#restarts = new Counter({ name: name("stage_worker_restarts_total"), help: "Workers replaced after dying or overrunning", labelNames: ["stage"], registers });
    this.#firstChunk = new Histogram({ name: name("stream_first_chunk_seconds"), help: "Time from a streamed request's arrival to its first chunk", labelNames: ["route"], buckets: [...latencyBuckets], registers });
    this.#chunkInterval = new FastHistogram(name("stream_chunk_interval_seconds"), "Time between one chunk of a stream and the next", ["route"], latencyBuckets, this.registry);
    this.#phaseQueue = new FastHistogram(name("request_queue_seconds"), "Time an answered request waited in queues, every stage's together (the batch-fill wait included)", ["route", "protocol"], latencyBuckets, this.registry);
    this.#phaseFill = new FastHistogram(name("request_batch_fill_seconds"), "The part of a request's queue time spent held back for its batch to fill while a worker was free (maxWaitMs at work)", ["route", "protocol"], latencyBuckets, this.registry);
    this.#phaseForward = new FastHistogram(name("request_forward_seconds"), "Time an answered request's batches spent at workers, every stage's together, IPC included", ["route", "protocol"], latencyBuckets, this.registry);
    this.#phaseBatch = new FastHistogram(name("request_batch_size"), "The size of the (last stage's) batch each answered request went in", ["route", "protocol"], batchBuckets, this.registry);
    this.#chunks = new Histogram({ name: name("stream_chunks"), help: "Chunks sent per stream", labelNames: ["route"], buckets: CHUNK_BUCKETS, registers });
    this.#activeStreams = new Gauge({ name: name("streams_active"), help: "Streams whose first chunk was sent and that have not ended", labelNames: ["route"], registers });
    this.#cancelled = new Counter({ name: name("stream_cancellations_total"), help: "Streams cut short, by reason: client (disconnected), deadline, slow_client (its backlog was full), error (its Worker failed it)", labelNames: ["route", "reason"], registers });
    this.#queueOutcomes = new Counter({ name: name("queue_outcomes_total"), help: "What the queue rules did to requests, by priority level (0: the queue has none): full (429 at the level's maxQueueSize), timeout (408 at its queue timeout), delayed (put behind its level), expired (408 when taken: its deadline passed, never computed)", labelNames: ["stage", "model", "level", "outcome"], registers });
    this.#requestsCancelled = new Counter({ name: name("requests_cancelled_total"), help: "Requests cancelled before their answer, by how: id (DELETE /v2/requests/{id}), grpc (the client cancelled its call)", labelNames: ["by"], registers });
    this.#requestsCancelled.labels("id").inc(0);
    this.#predicted = new Histogram({ name: name("stage_predicted_seconds"), help: "The time admission by predicted latency foresaw for each request it admitted, from joining the queue to its batch's return (predictAdmission)", labelNames: ["stage", "model"], buckets: [...latencyBuckets], registers });
    this.#actual = new Histogram({ name: name("stage_predicted_actual_seconds"), help: "The real time of the same requests, from joining the queue to their batch's return: against stage_predicted_seconds, how good the prediction is", labelNames: ["stage", "model"], buckets: [...latencyBuckets], registers });
    this.#tenants = new Counter({ name: name("tenant_requests_total"), help: "Requests of the queues that share between tenants, by tenant (those of tenantWeights and the first maxTenants others; the rest are \"other\") and outcome: queued, served (sent to a worker), rejected (refused, or failed by a queue rule)", labelNames: ["stage", "model", "tenant", "outcome"], registers });
    this.#cache = new Counter({ name: name("cache_requests_total"), help: "Requests to routes and models with a response cache, by result: hit (answered from it, never queued), miss (computed, and kept), skip (a stream, or Cache-Control: no-cache)", labelNames: ["route", "result"], registers });
    this.#lifecycle = modelSeries(name, this.registry, gauges);
    this.#mosec = mosec === undefined ? undefined : new MosecSeries(mosec, this.registry, gauges.inFlight);
    this.#chosenWait = new Gauge({ name: name("stage_batch_wait_seconds"), help: "The wait maxWaitMs \"auto\" chose for the last partial batch of a stage or a model", labelNames: ["stage", "model"], registers });
  }

  /** The whole server's load now, read from the same gauges as a scrape (for a load report). */
  load(): Load {
    return loadOf([...this.#gauges.stages(), ...this.#gauges.models()], this.#gauges.inFlight());
  }

  /** `count` requests were cancelled, by id or by their gRPC call. */
  cancelled(by: "id" | "grpc", count = 1): void {
    this.#requestsCancelled.labels(by).inc(count);
  }

  /** A request to `route`, which has a response cache, was a hit, a miss or skipped it. */
  cached(route: string, result: "hit" | "miss" | "skip"): void {
    this.#cache.labels(route, result).inc();
  }

  /** The recorder of one route's streams. */
  streams(route: string): StreamMetrics {
    let recorder = this.#streamRecorders.get(route);
    if (recorder === undefined) this.#streamRecorders.set(route, (recorder = this.#streamRecorder(route)));
    return recorder;
  }

  // Made once per route: a streamed request takes its route's, with no label lookup.
  #streamRecorder(route: string): StreamMetrics {
    const firstChunk = this.#firstChunk.labels(route);
    const interval = this.#chunkInterval.series({ route });
    const chunks = this.#chunks.labels(route);
    const active = this.#activeStreams.labels(route);
    active.inc(0);
    return {
      started: (ms) => {
        firstChunk.observe(ms / 1000);
        active.inc();
      },
      interval: (ms) => interval.observe(ms / 1000),
      ended: (n) => {
        chunks.observe(n);
        active.dec();
      },
      cancelled: (reason) => this.#cancelled.labels(route, reason).inc(),
    };
  }

  /** The recorder for one stage, or for the shared pool (`models`). */
  stage(stage: string): StageMetrics {
    const restarts = this.#restarts.labels(stage);
    // Create the series now, so a stage that has not restarted shows 0 rather than nothing.
    restarts.inc(0);
    return this.#recorder({ stage }, () => restarts.inc());
  }

  /** What counts a model version's loads and evictions (`model_loads_total`, `model_evictions_total`). */
  modelLifecycle(model: string, version: string): ModelLifecycle {
    return this.#lifecycle(model, version);
  }

  /** The shared pool's parts now, as the model series read them at a scrape. */
  modelParts(): readonly ModelPartGauges[] {
    return this.#gauges.modelParts();
  }

  /** The recorder for one model version (`name` or `name/version`); its workers' restarts are the shared pool's. */
  model(model: string): StageMetrics {
    return this.#recorder({ model }, () => {});
  }

  #recorder(owner: Owner, restart: () => void): StageMetrics {
    const batch = this.#batchSize.series(owner);
    const wait = this.#queueWait.series(owner);
    const forward = this.#forward.series(owner);
    const retries = this.#retries.labels(owner);
    // Shown as 0 before the first split, as restarts are.
    retries.inc(0);
    // The prediction's and the wait's series are made on first use: only queues that predict or choose their wait have them.
    let predicted: Histogram.Internal<string> | undefined;
    let actual: Histogram.Internal<string> | undefined;
    let chosen: Gauge.Internal<string> | undefined;
    const mosec = "stage" in owner ? this.#mosec?.stage(owner.stage) : undefined;
    return {
      batch: mosec === undefined ? (size) => batch.observe(size) : (size, workerId) => (batch.observe(size), mosec.batch(size, workerId)),
      queueWait: (ms) => wait.observe(ms / 1000),
      forward: mosec === undefined ? (ms) => forward.observe(ms / 1000) : (ms, workerId) => (forward.observe(ms / 1000), mosec.forward(ms, workerId)),
      retried: (runs) => retries.inc(runs),
      restart,
      workerReport: (workerId, metrics) => this.#workerReport(owner, workerId, metrics),
      queueOutcome: (outcome, level) => this.#queueOutcomes.labels({ ...owner, level: String(level), outcome }).inc(),
      predicted: (predictedMs, actualMs) => {
        (predicted ??= this.#predicted.labels(owner)).observe(predictedMs / 1000);
        (actual ??= this.#actual.labels(owner)).observe(actualMs / 1000);
      },
      tenant: (share, outcome) => this.#tenants.labels({ ...owner, tenant: share, outcome }).inc(),
      waitChosen: (ms) => (chosen ??= this.#chosenWait.labels(owner)).set(ms / 1000),
    };
  }

  /**
   * The counter of the sub-items a stage's fan-outs make, by route: `count` more for a request
   * to `route`. The series of `routes` show 0 until the first.
   */
  subItems(stage: string, routes: readonly string[]): (route: string, count: number) => void {
    for (const route of routes) this.#subItems.labels(route, stage).inc(0);
    return (route, count) => this.#subItems.labels(route, stage).inc(count);
  }

  /**
   * A request to `route` that came by `protocol` was answered with `code` after `ms`; its task,
   * when it was sent to a worker, gives the time of each phase and its batch's size. A traced
   * request gives its `exemplar` (its trace and span ids), kept on each of its buckets.
   */
  answered(route: string, code: number, ms: number, protocol: Protocol = "http", task?: Phases, exemplar?: Readonly<Record<string, string>>): void {
    // Series are looked up once per route, protocol and code.
    const key = protocol === "http" ? route : `${protocol} ${route}`;
    let children = this.#answers.get(key);
    if (children === undefined) {
      const labels = { route, protocol };
      children = {
        latency: this.#latency.series(labels),
        queue: this.#phaseQueue.series(labels),
        fill: this.#phaseFill.series(labels),
        forward: this.#phaseForward.series(labels),
        batch: this.#phaseBatch.series(labels),
        byCode: new Map(),
      };
      this.#answers.set(key, children);
    }
    if (task !== undefined && task.batchSize > 0) {
      observe(children.queue, task.queueMs / 1000, exemplar);
      observe(children.fill, task.fillMs / 1000, exemplar);
      observe(children.forward, task.forwardMs / 1000, exemplar);
      observe(children.batch, task.batchSize, exemplar);
    }
    let count = children.byCode.get(code);
    if (count === undefined) {
      count = this.#requests.series({ route, code: String(code), protocol });
      children.byCode.set(code, count);
    }
    count.inc();
    observe(children.latency, ms / 1000, exemplar);
    if (protocol === "http") this.#mosec?.answered(route, code, ms);
  }

  // Keeps a worker's latest report of its own metrics; `undefined` forgets the worker.
  #workerReport(owner: Owner, workerId: number, metrics: WorkerMetricsReport | undefined): void {
    const key = `${"stage" in owner ? `stage:${owner.stage}` : `model:${owner.model}`}/${workerId}`;
    if (metrics === undefined) this.#workers.delete(key);
    else this.#workers.set(key, { labels: { ...owner, worker: String(workerId) }, metrics });
  }

  /**
   * The exposition text: the server's metrics, then every worker's with `stage` (or `model`) and
   * `worker` labels; as OpenMetrics (with exemplars) when `openMetrics`, else Prometheus's text.
   */
  async text(openMetrics = false): Promise<string> {
    let registry = this.registry;
    if (this.#workers.size > 0) {
      const labelled = [...this.#workers.values()].map(({ labels, metrics }) =>
        metrics.map((m) => ({ ...m, values: m.values.map((v) => ({ ...v, labels: { ...v.labels, ...labels } })) })),
      );
      registry = Registry.merge([this.registry, AggregatorRegistry.aggregate(labelled)]);
    }
    return openMetrics ? openMetricsText(registry) : registry.metrics();
  }

  /** The content type of {@link text}'s answer. */
  contentType(openMetrics = false): string {
    return openMetrics ? OPENMETRICS_CONTENT_TYPE : this.registry.contentType;
  }
}

// One observation, with its request's exemplar when it was traced (tracing off: never).
function observe(series: HistogramSeries, value: number, exemplar: Readonly<Record<string, string>> | undefined): void {
  if (exemplar === undefined) series.observe(value);
  else series.observeWithExemplar(value, exemplar);
}
