import { ShoalError, errorFromWire } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics, StageMetrics, WorkerMetricsReport } from "../metrics/registry.js";
import { BatchQueue } from "../scheduling/batch-queue.js";
import type { Task } from "../scheduling/task.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { BatchItem, LoadFailedMessage, LoadedMessage, RequestLimits, ResultMessage } from "../workers/messages.js";
import { Pool, type PoolOwner } from "../workers/pool.js";
import { attached } from "../workers/transfer.js";
import type { ModelSpec } from "./repository.js";
import type { TensorMetadata } from "./settings.js";
import { ModelStats } from "./stats.js";

/** What the shared pool needs from the server around it. */
export interface ModelPoolOptions {
  /** Workers in the pool. */
  workers: number;
  channel: ChannelFactory;
  /** What one request may make a worker allocate. */
  limits: RequestLimits;
  /** Most requests one model may hold queued; more are refused with 429. */
  capacity: number;
  /** Cap on one batch's run on a worker, in ms. */
  timeoutMs: number;
  /** What all loaded replicas may cost together, in bytes (Infinity: no budget). */
  memoryBytes: number;
  logger: Logger;
  metrics: Metrics;
}

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
}

/**
 * One loaded (or loading) copy of a model version on some workers. A reload makes a new
 * instance; the old one serves until the new one is ready, then leaves once its batches are done.
 */
class Instance {
  /** Workers that loaded it. */
  readonly workers = new Set<number>();
  /** Workers still loading it. */
  readonly pending = new Set<number>();
  /** Batches in workers. */
  inFlight = 0;
  /** Why the last load on a worker failed. */
  failure: ShoalError | undefined;
  /** Some replica found no room in the memory budget. */
  noRoom = false;
  metadata: ModelMetadata | undefined;
  /**
   * Settles once its load is over: with undefined when it serves, or with why it does not (it
   * failed, or it was dropped before it loaded). Never rejects.
   */
  readonly settled: Promise<ShoalError | undefined>;
  #settle!: (outcome: ShoalError | undefined) => void;
  #loading = true;

  constructor(
    readonly key: string,
    readonly model: ModelVersion,
  ) {
    this.settled = new Promise((resolve) => (this.#settle = resolve));
  }

  /** Whether its load is still under way: a load of its model may join it. */
  get loading(): boolean {
    return this.#loading;
  }

  /** Ends its load with `outcome`; later calls change nothing. */
  done(outcome: ShoalError | undefined): void {
    this.#loading = false;
    this.#settle(outcome);
  }
}

/** A model version: its settings, its queue, its state and its current instance. */
export class ModelVersion {
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
  #drained: (() => void)[] = [];

  constructor(
    public spec: ModelSpec,
    pool: ModelPool,
    capacity: number,
    metrics: Metrics,
  ) {
    this.stats = new ModelStats();
    this.metrics = metrics.stage(`model:${this.label}`);
    // The policy reads the current settings, which a reload may change.
    const settings = () => this.spec;
    const policy = {
      get maxBatchSize() {
        return settings().maxBatchSize;
      },
      get maxWaitMs() {
        return settings().maxWaitMs;
      },
    };
    this.queue = new BatchQueue(policy, capacity, `model ${this.label}`, () => pool.pump(), (ms) => {
      this.metrics.queueWait(ms);
      this.stats.queued(ms);
    });
  }

  /** `name` or `name/version`, for logs and messages. */
  get label(): string {
    return this.spec.version === "" ? this.spec.name : `${this.spec.name}/${this.spec.version}`;
  }

  /** Whether it is ready to serve: loaded on at least one live worker. */
  get ready(): boolean {
    return this.state === "ready";
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

/** A batch in a worker. */
interface Flight {
  model: ModelVersion;
  instance: Instance;
}

/**
 * The shared pool: N workers that host every model. A model version is loaded on `replicas`
 * workers, those holding the fewest bytes of models; each version has its own queue and batch
 * policy, and a free worker takes the next batch of a model it has loaded. Workers that die are
 * replaced and get their models again. With a memory budget, loading a model that does not fit
 * first evicts the least recently used idle ones.
 */
export class ModelPool implements PoolOwner {
  readonly pool: Pool;
  readonly #options: ModelPoolOptions;
  readonly #log: Logger;
  readonly #versions = new Map<string, ModelVersion>();
  readonly #instances = new Map<string, Instance>();
  /** The instances each worker holds or is loading. */
  readonly #hosted = new Map<number, Set<Instance>>();
  readonly #flights = new Map<Task[], Flight>();
  #generation = 0;
  /** Settles once start-up has begun loading the models (rejects if the workers did not start). */
  readonly #startup: Promise<void>;
  #begin!: (error?: ShoalError) => void;
  #started = false;

  constructor(options: ModelPoolOptions) {
    this.#options = options;
    this.#startup = new Promise((resolve, reject) => (this.#begin = (error) => (error === undefined ? resolve() : reject(error))));
    // A pool that never starts has no control request to fail, or one that gets this error.
    this.#startup.catch(() => {});
    this.#log = options.logger.child({ pool: "models" });
    this.pool = new Pool(
      {
        name: "models",
        num: options.workers,
        boot: (workerId) => ({ host: true, workerId, num: options.workers, limits: options.limits }),
        timeoutMs: options.timeoutMs,
        env: undefined,
        channel: options.channel,
        logger: options.logger,
        metrics: options.metrics.stage("models"),
      },
      this,
    );
  }

  /** Every model version, loaded or not. */
  versions(): ModelVersion[] {
    return [...this.#versions.values()];
  }

  /** Why the pool is not ready: a model that should be loaded is not, or undefined. */
  notReady(): string | undefined {
    const loading = this.versions().filter((m) => m.state === "loading");
    return loading.length > 0 ? `loading ${loading.map((m) => m.label).join(", ")}` : undefined;
  }

  /** Starts the workers, then loads every model; resolves when each load has succeeded or failed. */
  async start(): Promise<void> {
    try {
      await this.pool.start();
    } catch (err) {
      this.#begin(new ShoalError("NOT_READY", "the shared pool did not start"));
      throw err;
    }
    this.#started = true;
    const loads = this.versions().map((m) => this.#load(m));
    this.#begin();
    await Promise.all(loads);
  }

  /** Adds a model version to be loaded when the pool starts. */
  register(spec: ModelSpec): void {
    this.#version(spec);
  }

  /**
   * Loads a model version, or reloads it when it is loaded: the new instance serves before the
   * old one goes. Resolves when it is ready; rejects with why it could not load. A load under
   * way with the same settings (at start-up, or for a request of an evicted model) is joined;
   * one with other settings is waited for, then this one loads. During start-up it waits for
   * the workers.
   */
  async load(spec: ModelSpec): Promise<void> {
    await this.#startup;
    const model = this.#version(spec);
    // A load during an unload waits for it, then starts afresh.
    if (model.state === "unloading") await model.drained();
    let under = this.#underWay(model);
    while (under !== undefined && !sameSpec(model.spec, spec)) {
      await under.settled;
      under = this.#underWay(model);
    }
    if (under === undefined) model.spec = spec;
    const outcome = await (under?.settled ?? this.#load(model));
    if (outcome !== undefined) throw outcome;
  }

  /**
   * Unloads a version once its queued and running requests are answered. A load of it still
   * under way is dropped, and its waiters are answered 409.
   */
  async unload(model: ModelVersion): Promise<void> {
    await this.#startup;
    if (model.state === "unloaded") return;
    model.state = "unloading";
    model.reason = "unloading";
    this.pump();
    await model.drained();
    const why = "it was unloaded before it finished loading";
    this.#drop(model.current, why);
    this.#drop(model.next, why);
    model.current = model.next = undefined;
    model.state = "unloaded";
    model.reason = "unloaded";
  }

  /** Forgets a version that is unloaded (gone from its repository). */
  remove(model: ModelVersion): void {
    if (model.state === "unloaded") this.#versions.delete(keyOf(model.spec.name, model.spec.version));
  }

  /**
   * Queues a request for a model. An evicted model is loaded again; the request waits in the
   * queue meanwhile, within its deadline.
   */
  admit(model: ModelVersion, task: Task): ShoalError | undefined {
    if (model.state === "failed") return new ShoalError("NOT_READY", `model ${model.label} failed to load: ${model.reason}`);
    if (model.state === "unloading" || model.state === "unloaded") return new ShoalError("NOT_FOUND", `model ${model.label} is ${model.state}`);
    const refused = model.queue.admit(task);
    if (refused !== undefined) return refused;
    model.lastUsed = performance.now();
    if (model.state === "evicted") void this.#load(model);
    else this.pump();
    return undefined;
  }

  /** Stops every worker once what it runs is done; resolves when all have exited. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** Hands queued requests to free workers that have their model, until none can take more. */
  pump(): void {
    let progress = true;
    while (progress) {
      progress = false;
      const idle = new Set(this.pool.idleWorkers());
      if (idle.size === 0) return;
      // One batch per model a pass, so that a busy model does not starve the others.
      for (const model of this.#versions.values()) {
        const instance = model.current;
        if (instance === undefined || model.queue.queued === 0 || !(model.state === "ready" || model.state === "unloading")) continue;
        const worker = this.#leastNeeded(instance, idle);
        if (worker === undefined) continue;
        const tasks = model.queue.next();
        if (tasks === undefined) continue;
        progress = true;
        if (tasks.length === 0) continue;
        idle.delete(worker);
        this.#dispatch(model, instance, worker, tasks);
      }
    }
    // Queued requests of a model being unloaded may have settled while waiting (deadline, client gone).
    for (const model of this.#versions.values()) if (model.state === "unloading") model.checkDrained();
  }

  onWorkerFree(): void {
    this.pump();
  }

  onWorkerUp(): void {
    if (this.#started) this.#reconcile();
  }

  onWorkerGone(workerId: number): void {
    const lost = this.#hosted.get(workerId) ?? new Set();
    this.#hosted.delete(workerId);
    for (const instance of lost) {
      instance.workers.delete(workerId);
      this.#options.metrics.workerReport(`model:${instance.model.label}`, workerId, undefined);
      const model = instance.model;
      if (instance === model.current && instance.workers.size === 0 && model.state === "ready") {
        // Its requests wait in its queue while the replacement loads it.
        model.state = "loading";
        model.reason = "its workers died; loading it on their replacements";
      }
      if (instance.pending.delete(workerId)) {
        instance.failure ??= new ShoalError("NOT_READY", "the worker died while loading it");
        if (instance.pending.size === 0) this.#settled(instance);
      }
    }
    this.#log.warn({ worker: workerId, models: [...lost].map((i) => i.model.label) }, "a worker of the shared pool died; its models load again on its replacement");
  }

  onModelMetrics(workerId: number, model: string, metrics: WorkerMetricsReport): void {
    this.#options.metrics.workerReport(`model:${model}`, workerId, metrics);
  }

  onLoadReply(workerId: number, message: LoadedMessage | LoadFailedMessage): void {
    const instance = this.#instances.get(message.model);
    if (instance === undefined || !instance.pending.delete(workerId)) return;
    if (message.kind === "loaded") {
      instance.workers.add(workerId);
      instance.metadata = { platform: message.platform, inputs: message.inputs, outputs: message.outputs };
      this.#log.debug({ model: instance.model.label, worker: workerId }, "model replica loaded");
    } else {
      this.#hosted.get(workerId)?.delete(instance);
      instance.failure = errorFromWire(message.error);
      this.#log.error({ model: instance.model.label, worker: workerId, err: message.error.stack ?? message.error.message }, "model failed to load");
    }
    if (instance.pending.size === 0) this.#settled(instance);
  }

  onBatchDone(tasks: Task[], result: ResultMessage, _contentType: string, elapsedMs: number): void {
    const { model, instance } = this.#landed(tasks);
    model.metrics.forward(elapsedMs);
    model.stats.batch(tasks.length, elapsedMs);
    if (result.error !== undefined) {
      this.#logUnexpected(model, result.error.stack);
      const error = errorFromWire(result.error);
      for (const task of tasks) this.#fail(model, task, error);
    } else {
      const results = result.results!;
      tasks.forEach((task, i) => {
        const item = results[i]!;
        if (!item.ok) {
          this.#logUnexpected(model, item.error.stack);
          this.#fail(model, task, errorFromWire(item.error));
        } else if (!task.settled) {
          model.stats.succeeded(performance.now() - task.enqueuedAt);
          task.succeed(item.value as Uint8Array, item.contentType ?? "application/json", item.headers);
        }
      });
    }
    this.#retire(model, instance);
  }

  onBatchLost(tasks: Task[], error: ShoalError): void {
    const { model, instance } = this.#landed(tasks);
    for (const task of tasks) this.#fail(model, task, error);
    this.#retire(model, instance);
  }

  // Loads a version that is not loaded, or reloads one that is; resolves with the load's outcome.
  #load(model: ModelVersion): Promise<ShoalError | undefined> {
    const instance = new Instance(`${model.spec.name}:${model.spec.version}#${++this.#generation}`, model);
    this.#instances.set(instance.key, instance);
    const why = "a newer load replaced this one";
    const reload = model.current !== undefined && model.state === "ready";
    if (reload) {
      this.#drop(model.next, why);
      model.next = instance;
    } else {
      this.#drop(model.current, why);
      model.current = instance;
      model.state = "loading";
      model.reason = "loading";
    }
    this.#place(instance);
    if (instance.pending.size === 0) this.#settled(instance);
    return instance.settled;
  }

  // The instance of `model` whose load is under way, if any.
  #underWay(model: ModelVersion): Instance | undefined {
    return [model.next, model.current].find((i) => i?.loading);
  }

  // The version of `spec`, added if it is new.
  #version(spec: ModelSpec): ModelVersion {
    const key = keyOf(spec.name, spec.version);
    let model = this.#versions.get(key);
    if (model === undefined) this.#versions.set(key, (model = new ModelVersion(spec, this, this.#options.capacity, this.#options.metrics)));
    return model;
  }

  // Loads `instance` on as many more workers as its model's replicas ask, choosing the workers
  // that hold the fewest bytes (then the fewest models), evicting idle models to keep within
  // the memory budget.
  #place(instance: Instance): void {
    const { spec } = instance.model;
    const live = this.pool.liveWorkers();
    const want = Math.min(spec.replicas, live.length) - instance.workers.size - instance.pending.size;
    const candidates = live
      .filter((w) => !instance.workers.has(w) && !instance.pending.has(w))
      .sort((a, b) => this.#bytesOn(a) - this.#bytesOn(b) || this.#hostedOn(a).size - this.#hostedOn(b).size);
    for (const workerId of candidates.slice(0, Math.max(0, want))) {
      if (!this.#makeRoom(spec.costBytes, instance.model)) {
        instance.noRoom = true;
        instance.failure = new ShoalError("NOT_READY", `its ${spec.costBytes} bytes do not fit in the pool's memory budget of ${this.#options.memoryBytes} bytes beside the models in use`);
        break;
      }
      instance.pending.add(workerId);
      this.#hostedOn(workerId).add(instance);
      this.pool.send(workerId, {
        kind: "load",
        model: instance.key,
        name: spec.name,
        version: spec.version,
        runtime: spec.runtime,
        dir: spec.dir,
        ...(spec.file === undefined ? {} : { file: spec.file }),
        maxBatchSize: spec.maxBatchSize,
        workers: this.#options.workers,
        parameters: spec.parameters,
        ...(spec.inputs === undefined ? {} : { inputs: spec.inputs }),
        ...(spec.outputs === undefined ? {} : { outputs: spec.outputs }),
      });
    }
  }

  // No worker is still loading `instance`: it is ready if some worker loaded it. Its waiters
  // learn the outcome once the model's state below is set.
  #settled(instance: Instance): void {
    const model = instance.model;
    const loaded = instance.workers.size > 0;
    instance.done(loaded ? undefined : (instance.failure ?? new ShoalError("NOT_READY", `no worker to load model ${model.label} on`)));
    if (instance === model.next) {
      if (loaded) {
        const old = model.current!;
        model.current = instance;
        model.next = undefined;
        model.metadata = instance.metadata;
        // Its old instance's workers may have died meanwhile.
        if (model.state === "loading") [model.state, model.reason] = ["ready", ""];
        this.#log.info({ model: model.label, workers: [...instance.workers] }, "model reloaded");
        this.#retire(model, old);
      } else {
        this.#drop(instance);
        model.next = undefined;
      }
    } else if (instance === model.current && model.state === "loading") {
      if (loaded) {
        model.state = "ready";
        model.reason = "";
        model.metadata = instance.metadata;
        this.#log.info({ model: model.label, workers: [...instance.workers], costBytes: model.spec.costBytes }, "model loaded");
      } else if (instance.noRoom && model.spec.costBytes <= this.#options.memoryBytes) {
        // Room may be made later, when other models are idle: its next request tries again.
        this.#drop(instance);
        model.current = undefined;
        model.state = "evicted";
        model.reason = `waiting for room: ${instance.failure!.message}`;
      } else {
        model.state = "failed";
        model.reason = instance.failure?.message ?? "no worker to load it on";
        for (const task of model.queue.drain()) task.fail(new ShoalError("NOT_READY", `model ${model.label} failed to load: ${model.reason}`));
      }
    }
    this.pump();
  }

  // Evicts the least recently used idle models until `bytes` more fit in the budget. False if
  // they cannot.
  #makeRoom(bytes: number, forModel: ModelVersion): boolean {
    const budget = this.#options.memoryBytes;
    let used = 0;
    for (const instances of this.#hosted.values()) for (const i of instances) used += i.model.spec.costBytes;
    if (used + bytes <= budget) return true;
    const idle = this.versions()
      .filter((m) => m !== forModel && m.state === "ready" && m.queue.queued === 0 && m.current!.inFlight === 0 && m.next === undefined)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    for (const model of idle) {
      used -= model.spec.costBytes * model.current!.workers.size;
      this.#drop(model.current);
      model.current = undefined;
      model.state = "evicted";
      model.reason = "evicted to make room; loads again on its next request";
      this.#log.info({ model: model.label, forModel: forModel.label }, "model evicted");
      if (used + bytes <= budget) return true;
    }
    return false;
  }

  // Brings every model that should be loaded back to its replicas (after a worker came back).
  #reconcile(): void {
    for (const model of this.#versions.values()) {
      const instance = model.current;
      if (instance === undefined || !(model.state === "ready" || model.state === "loading")) continue;
      this.#place(instance);
      // Nothing placed and nothing loaded: it does not fit the budget.
      if (instance.pending.size === 0 && instance.workers.size === 0 && instance.noRoom) this.#settled(instance);
    }
  }

  // An old instance leaves once its last batch is back. A model that had no room has requests
  // waiting: a model may be idle now, so it tries again.
  #retire(model: ModelVersion, instance: Instance): void {
    if (instance !== model.current && instance !== model.next && instance.inFlight === 0) this.#drop(instance);
    model.checkDrained();
    for (const waiting of this.#versions.values()) if (waiting.state === "evicted" && waiting.queue.queued > 0) void this.#load(waiting);
    this.pump();
  }

  // Unloads an instance from its workers and forgets it. If its load was still under way, its
  // waiters are answered 409 with `why`.
  #drop(instance: Instance | undefined, why = "its load was cancelled"): void {
    if (instance === undefined) return;
    instance.done(new ShoalError("CONFLICT", `model ${instance.model.label}: ${why}`));
    if (!this.#instances.delete(instance.key)) return;
    for (const workerId of [...instance.workers, ...instance.pending]) {
      this.#hosted.get(workerId)?.delete(instance);
      this.pool.send(workerId, { kind: "unload", model: instance.key });
      this.#options.metrics.workerReport(`model:${instance.model.label}`, workerId, undefined);
    }
    instance.workers.clear();
    instance.pending.clear();
  }

  #dispatch(model: ModelVersion, instance: Instance, workerId: number, tasks: Task[]): void {
    const items: BatchItem[] = new Array(tasks.length);
    const transfer: ArrayBuffer[] = [];
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      items[i] = { payload: task.payload, ingress: true, egress: true, meta: task.meta };
      if (task.transfer !== undefined) transfer.push(...task.transfer);
      task.payload = undefined;
      task.transfer = undefined;
    }
    instance.inFlight++;
    model.lastUsed = performance.now();
    model.metrics.batch(tasks.length);
    this.#flights.set(tasks, { model, instance });
    this.pool.dispatch(tasks, { kind: "batch", items, model: instance.key }, transfer.length > 0 ? attached(transfer) : transfer, workerId);
  }

  #landed(tasks: Task[]): Flight {
    const flight = this.#flights.get(tasks)!;
    this.#flights.delete(tasks);
    flight.instance.inFlight--;
    return flight;
  }

  #fail(model: ModelVersion, task: Task, error: ShoalError): void {
    if (task.settled) return;
    model.stats.failed(performance.now() - task.enqueuedAt);
    task.fail(error);
  }

  // Of the free workers that have the instance, the one whose other models have the fewest
  // requests waiting: taking it keeps the others free for the models only they can serve.
  #leastNeeded(instance: Instance, idle: Set<number>): number | undefined {
    let best: number | undefined;
    let fewest = Infinity;
    for (const workerId of instance.workers) {
      if (!idle.has(workerId)) continue;
      let waiting = 0;
      for (const other of this.#hostedOn(workerId)) if (other !== instance) waiting += other.model.queue.queued;
      if (waiting < fewest) [best, fewest] = [workerId, waiting];
    }
    return best;
  }

  #bytesOn(workerId: number): number {
    let bytes = 0;
    for (const instance of this.#hostedOn(workerId)) bytes += instance.model.spec.costBytes;
    return bytes;
  }

  #hostedOn(workerId: number): Set<Instance> {
    let set = this.#hosted.get(workerId);
    if (set === undefined) this.#hosted.set(workerId, (set = new Set()));
    return set;
  }

  #logUnexpected(model: ModelVersion, stack: string | undefined): void {
    if (stack !== undefined) this.#log.error({ model: model.label, err: stack }, "inference failed");
  }
}

// Whether two specs load the same thing (they come from the same code, in the same key order).
function sameSpec(a: ModelSpec, b: ModelSpec): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function keyOf(name: string, version: string): string {
  return `${name}\u0000${version}`;
}
