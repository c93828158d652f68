import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { QueueLoad } from "./load-report.js";

// The shapes the metric registry (registry.ts) takes and gives, apart from it so that it stays about the metrics.

/** Where an answered request's time went, as its task kept it (a scheduling Task is one). */
export interface Phases {
  /** In queues, every step's together, in ms. */
  readonly queueMs: number;
  /** The part of `queueMs` held back for a batch to fill while a worker was free, in ms. */
  readonly fillMs: number;
  /** At workers, every step's together, in ms. */
  readonly forwardMs: number;
  /** Its last batch's size; 0: it never reached a worker. */
  readonly batchSize: number;
}

/** How a request came: REST (HTTP/1.1) or gRPC. */
export type Protocol = "http" | "grpc";

/** What a stage or a model records, bound to its label once so the hot path does no lookups. */
export interface StageMetrics {
  /** A batch of this many items was dispatched, to worker `workerId`. */
  batch(size: number, workerId: number): void;
  /** An item waited this long in the queue, in ms. */
  queueWait(ms: number): void;
  /** A forward call of worker `workerId` took this long, IPC included, in ms. */
  forward(ms: number, workerId: number): void;
  /** A batch that failed as a whole was run again in parts, in this many runs. */
  retried(runs: number): void;
  /** A worker was replaced. */
  restart(): void;
  /** A worker reported its own metrics; `undefined` when it is gone. */
  workerReport(workerId: number, metrics: WorkerMetricsReport | undefined): void;
  /** A queue rule did this to a task at its priority level (0: the queue has no levels). */
  queueOutcome(outcome: QueueOutcome, level: number): void;
  /** A request admitted on a predicted time (ms, from joining the queue to its batch's return) took `actualMs`. */
  predicted(predictedMs: number, actualMs: number): void;
  /** `maxWaitMs: "auto"` chose this wait for a partial batch, in ms. */
  waitChosen(ms: number): void;
  /** What became of a request of a queue that shares between tenants, by its tenant's share (a bounded label). */
  tenant(share: string, outcome: TenantOutcome): void;
}

/** What became of a tenant's request in a queue: `queued`, `served` (sent to a worker), `rejected` (refused, or failed by a queue rule). */
export type TenantOutcome = "queued" | "served" | "rejected";

/**
 * What a queue rule did to a task: `full` refused at its level's `maxQueueSize` (429), `timeout`
 * answered 408 at its level's queue timeout, `delayed` put behind its level at its queue
 * timeout, `expired` answered 408 when taken, its deadline passed: never sent to a worker;
 * `shed` refused at once (429, 503 while starting) because it was predicted to miss its deadline.
 */
export type QueueOutcome = "full" | "timeout" | "delayed" | "expired" | "shed";

/** What one route's streams record. */
export interface StreamMetrics {
  /** A stream's first chunk went out this long after its request arrived, in ms. */
  started(ms: number): void;
  /** A chunk after a stream's first went out this long after the one before it, in ms. */
  interval(ms: number): void;
  /** A stream that had started ended (in any way) after this many chunks. */
  ended(chunks: number): void;
  /** A stream was cut short: its client left, its deadline passed, its client read too slowly, or its Worker failed it. */
  cancelled(reason: "client" | "deadline" | "slow_client" | "error"): void;
}

/** A worker's own metrics, as prom-client's `getMetricsAsJSON()` gives them. */
export type WorkerMetricsReport = MetricObjectWithValues<MetricValue<string>>[];

/** What a stage or a model shows at scrape time. Read only when scraped, never updated per request. */
export interface QueueGauges extends QueueLoad {
  readonly name: string;
  readonly liveWorkers: number;
}

/** A pool of workers at scrape time: a stage's, or the shared pool (`models`). */
export interface PoolGauges {
  readonly name: string;
  /** Worker slots waiting out a back-off before their next worker starts. */
  readonly backingOff: number;
}

/** What the server shows at scrape time. */
export interface ServerGauges {
  stages(): readonly QueueGauges[];
  /** Every pool of workers: each stage's, and the shared pool's. */
  pools(): readonly PoolGauges[];
  /** Model versions, named `name` or `name/version`. */
  models(): readonly QueueGauges[];
  /** The shared pool's parts, with their model versions' states, replicas and memory. */
  modelParts(): readonly ModelPartGauges[];
  /** Requests accepted and not yet answered. */
  inFlight(): number;
  /** Request body bytes held. */
  bytesInFlight(): number;
}

/** A model version of the shared pool at scrape time. */
export interface ModelGauges {
  readonly name: string;
  /** "" when it has no versions. */
  readonly version: string;
  /** loading, ready, failed, evicted, unloading or unloaded. */
  readonly state: string;
  /** Why it is not ready ("" when it is). */
  readonly reason: string;
  /** The workers of its part that hold it, by id. */
  readonly workers: readonly number[];
  /** What its replicas cost as the pool's memory budget counts them, loading ones included. */
  readonly bytes: number;
}

/** A part of the shared pool (`models`, the Node.js workers; `python-models`) at scrape time. */
export interface ModelPartGauges {
  readonly pool: string;
  /** What its replicas cost together, as the budget counts them. */
  readonly usedBytes: number;
  /** --model-memory-bytes; Infinity when there is no budget. */
  readonly budgetBytes: number;
  readonly models: readonly ModelGauges[];
}

/** What a model version's load and evictions count. */
export interface ModelLifecycle {
  /** A load of it finished and it serves (a first load, a reload, a load after an eviction). */
  loaded(): void;
  /** It was unloaded to make room for another. */
  evicted(): void;
}
