import { ShoalError } from "../errors.js";
import type { Metrics, ModelGauges, ModelLifecycle, StageMetrics } from "../metrics/registry.js";
import { BatchQueue } from "../scheduling/batch-queue.js";
import { queueOrderOf } from "../scheduling/priority-order.js";
import type { Delivery, Flight, ItemSuccess } from "../scheduling/dispatcher.js";
import type { Step, Task } from "../scheduling/task.js";
import type { ModelSpec } from "./repository.js";
import type { StreamPolicy } from "../stage-options.js";
import type { TensorMetadata } from "./settings.js";
import type { CustomHandler } from "../workers/messages.js";
import { ModelStats } from "./stats.js";
import { ResponseCache } from "../scheduling/response-cache.js";

/**
 * Where a model version stands. `evicted`: unloaded to make room, loaded again on its next
 * request. `unloaded`: unloaded on request; only a load brings it back.
 */
export type ModelState = "loading" | "ready" | "failed" | "evicted" | "unloading" | "unloaded";

/** The V2 metadata workers report when they load a model. */
export interface ModelMetadata {
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
  /** Set when its Worker streams. */
  stream?: StreamPolicy;
  /** The version of the package its runtime runs on, where the runtime says (the mlserver package's). */
  runtimeVersion?: string;
  /** An MLServer model's custom handlers (`@custom_handler`): the REST path and method of each, and its method's name. */
  handlers?: CustomHandler[];
  /** The model's metadata as its runtime gives it, answered as it is: an MLServer model's `metadata()` (its settings' free-form `versions`, `parameters`). */
  answer?: Record<string, unknown>;
}

/** What a model version needs of the pool that serves it. */
export interface Hosting {
  /** Loads again a model evicted to make room. */
  loadAgain(model: ModelVersion): void;
  /** Hands queued requests to free workers. */
  pump(): void;
  /** A batch of `instance` is back, or lost: an old instance may leave now. */
  retire(instance: Instance): void;
}

/**
 * One loaded (or loading) copy of a model version on some workers. A reload makes a new
 * instance; the old one serves until the new one is ready, then leaves once its batches are
 * done. Its batches' results are delivered here.
 */
export class Instance implements Delivery {
  /** Workers that loaded it. */
  readonly workers = new Set<number>();
  /** Workers still loading it. */
  readonly pending = new Set<number>();
  /** Batches in workers. */
  inFlight = 0;
  /** Items of those batches. */
  running = 0;
  /** Why the last load on a worker failed. */
  failure: ShoalError | undefined;
  /** Loads cut short by their worker dying (not by the model failing to load). */
  interrupted = 0;
  /** Some worker answered that the model failed to load. */
  refused = false;
  /** Some replica found no room in the memory budget. */
  noRoom = false;
  metadata: ModelMetadata | undefined;
  readonly batches = true;
  /**
   * Settles once its load is over: with undefined when it serves, or with why it does not (it
   * failed, or it was dropped before it loaded). Never rejects.
   */
  readonly settled: Promise<ShoalError | undefined>;
  #settle!: (outcome: ShoalError | undefined) => void;
  #loading = true;

  constructor(
    /** Unique in the pool: batches and unloads name it. */
    readonly key: string,
    readonly model: ModelVersion,
    readonly hosting: Hosting,
  ) {
    this.settled = new Promise((resolve) => (this.#settle = resolve));
  }

  /** Whether its load is still under way: a load of its model may join it. */
  get loading(): boolean {
    return this.#loading;
  }

  /** Ends its load with `outcome`; later calls change nothing. */
  done(outcome: ShoalError | undefined): void {
    if (this.#loading && outcome === undefined) this.model.lifecycle.loaded();
    this.#loading = false;
    this.#settle(outcome);
  }

  get metrics(): StageMetrics {
    return this.model.metrics;
  }

  get logFields(): Readonly<Record<string, string>> {
    return this.model.logFields;
  }

  get stream(): StreamPolicy | undefined {
    return this.metadata?.stream;
  }

  landed({ tasks }: Flight, elapsedMs: number | undefined): void {
    this.inFlight--;
    if (elapsedMs !== undefined) {
      this.model.stats.batch(tasks.length, elapsedMs);
      this.model.queue.landed(tasks, elapsedMs);
    }
    this.hosting.retire(this);
  }

  succeeded(task: Task, result: ItemSuccess): void {
    this.model.stats.succeeded(performance.now() - task.enqueuedAt);
    task.succeed(result.value as Uint8Array, result.contentType ?? "application/json", result.headers);
  }

  failed(task: Task, error: ShoalError): void {
    this.model.stats.failed(performance.now() - task.enqueuedAt);
    task.fail(error);
  }
}

/** A model version: its settings, its queue, its state and its current instance. */
export class ModelVersion implements Step {
  state: ModelState = "loading";
  /** Why it is not ready, for the repository index. */
  reason = "";
  current: Instance | undefined;
  /** The instance loading to replace `current` (a reload). */
  next: Instance | undefined;
  /** What its workers reported when it last loaded; kept while it is evicted. */
  metadata: ModelMetadata | undefined;
  /** When a request last used it (performance.now() clock), for eviction. */
  lastUsed = 0;
  readonly queue: BatchQueue;
  readonly stats: ModelStats;
  readonly metrics: StageMetrics;
  readonly lifecycle: ModelLifecycle;
  readonly logFields: Readonly<Record<string, string>>;
  /** Set when its settings give `responseCache` (as it was first made: a reload keeps it, and its answers are keyed by the loaded instance). */
  readonly cache: ResponseCache | undefined;
  #drained: (() => void)[] = [];

  constructor(
    public spec: ModelSpec,
    readonly hosting: Hosting,
    capacity: number,
    metrics: Metrics,
  ) {
    this.stats = new ModelStats();
    this.metrics = metrics.model(this.label);
    this.lifecycle = metrics.modelLifecycle(spec.name, spec.version);
    this.logFields = { model: this.label };
    const cached = spec.settings.responseCache;
    this.cache = cached === undefined ? undefined : new ResponseCache(cached.maxBytes, () => this.current?.key ?? "");
    // The policy reads the current settings, which a reload may change.
    const settings = () => this.spec;
    const policy = {
      get maxBatchSize() {
        return settings().maxBatchSize;
      },
      get maxWaitMs() {
        return settings().maxWaitMs;
      },
      get preferredBatchSize() {
        return settings().settings.preferredBatchSize;
      },
      get maxBatchCost() {
        return settings().settings.maxBatchCost;
      },
    };
    this.queue = new BatchQueue({
      policy,
      capacity,
      owner: `model ${this.label}`,
      // Its levels are those of the settings it was first made with: a reload keeps its queue.
      order: queueOrderOf(spec.settings),
      wake: () => hosting.pump(),
      waited: (ms) => {
        this.metrics.queueWait(ms);
        this.stats.queued(ms);
      },
      counted: (outcome, level) => this.metrics.queueOutcome(outcome, level),
      workers: () => this.liveWorkers,
      running: () => this.running,
      predict: spec.settings.predictAdmission,
      predicted: (predictedMs, actualMs) => this.metrics.predicted(predictedMs, actualMs),
      waitChosen: (ms) => this.metrics.waitChosen(ms),
      tenantCounted: (share, outcome) => this.metrics.tenant(share, outcome),
    });
  }

  /** Set when its Worker streams, as its workers reported when they last loaded it. */
  get stream(): StreamPolicy | undefined {
    return this.metadata?.stream;
  }

  /** `name` or `name/version`, for logs and messages. */
  get label(): string {
    return this.spec.version === "" ? this.spec.name : `${this.spec.name}/${this.spec.version}`;
  }

  /** Whether it is ready to serve: loaded on at least one live worker. */
  get ready(): boolean {
    return this.state === "ready";
  }

  /** Items waiting in its queue. */
  get queued(): number {
    return this.queue.queued;
  }

  /** Its items at workers now. */
  get running(): number {
    return this.current?.running ?? 0;
  }

  /** How long the next item to leave its queue has waited, in ms. */
  get behindMs(): number {
    return this.queue.behindMs;
  }

  /** Workers that hold its current instance. */
  get liveWorkers(): number {
    return this.current?.workers.size ?? 0;
  }

  /** Its gauges at scrape time; `bytes`: what its replicas cost as its pool counts them. */
  gauges(bytes: number): ModelGauges {
    return { name: this.spec.name, version: this.spec.version, state: this.state, reason: this.reason, workers: [...(this.current?.workers ?? [])].sort((a, b) => a - b), bytes };
  }

  /** Whether a free worker holding it may take its queued requests. */
  get serving(): boolean {
    return this.current !== undefined && (this.state === "ready" || this.state === "unloading");
  }

  /**
   * Queues a request for it. An evicted model is loaded again; the request waits in the queue
   * meanwhile, within its deadline.
   */
  admit(task: Task): ShoalError | undefined {
    if (this.state === "failed") return new ShoalError("NOT_READY", `model ${this.label} failed to load: ${this.reason}`);
    if (this.state === "unloading" || this.state === "unloaded") return new ShoalError("NOT_FOUND", `model ${this.label} is ${this.state}`);
    const refused = this.queue.admit(task);
    if (refused !== undefined) return refused;
    this.lastUsed = performance.now();
    if (this.state === "evicted") this.hosting.loadAgain(this);
    else this.hosting.pump();
    return undefined;
  }

  /** It could not load, for `reason`: the requests waiting for it are answered 503 with why. */
  fail(reason: string): void {
    this.state = "failed";
    this.reason = reason;
    for (const task of this.queue.drain()) task.fail(new ShoalError("NOT_READY", `model ${this.label} failed to load: ${reason}`));
  }

  /** Resolves when it has nothing queued and nothing in workers. */
  drained(): Promise<void> {
    if (this.#idle()) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }

  /** Called when a batch ends or a queued request settles. */
  checkDrained(): void {
    if (this.#drained.length > 0 && this.#idle()) for (const resolve of this.#drained.splice(0)) resolve();
  }

  #idle(): boolean {
    return this.queue.queued === 0 && (this.current?.inFlight ?? 0) === 0;
  }
}
