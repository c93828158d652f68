import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics, ModelPartGauges } from "../metrics/registry.js";
import { Dispatcher, type Chooser, type Flight, type IdleWorkers } from "../scheduling/dispatcher.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { RequestLimits } from "../workers/messages.js";
import type { Pool } from "../workers/pool.js";
import type { RestartLimit } from "../workers/restart-policy.js";
import { Instance, ModelVersion, type Hosting } from "./model-version.js";
import { pickWorker } from "./placement.js";
import { Replicas } from "./replicas.js";
import type { ModelSpec } from "./repository.js";

/** Loads of one model cut short by its worker dying that are tried again before the model fails. */
const MAX_INTERRUPTED_LOADS = 2;

/** What the shared pool needs from the server around it. */
export interface ModelPoolOptions {
  /** Its name in metrics and logs: "models" by default. */
  name?: string;
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
  /** The server's `--max-restarts`, which the pool's worker restarts count against. */
  restarts: RestartLimit;
}

/**
 * The shared pool: N workers that host every model. A model version is loaded on `replicas`
 * workers, those holding the fewest bytes of models; each version has its own queue and batch
 * policy, and a free worker takes the next batch of a model it has loaded. Workers that die are
 * replaced and get their models again. With a memory budget, loading a model that does not fit
 * first evicts the least recently used idle ones.
 */
export class ModelPool implements Hosting, Chooser {
  readonly #dispatcher: Dispatcher;
  readonly #options: ModelPoolOptions;
  readonly #log: Logger;
  readonly #versions = new Map<string, ModelVersion>();
  /** The same versions in an array, for the chooser's turns. */
  #order: ModelVersion[] = [];
  readonly #replicas: Replicas;
  /** Where the round of model versions offered to free workers starts next: each gets its turn. */
  #turn = 0;
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
    const name = options.name ?? "models";
    this.#log = options.logger.child({ pool: name });
    this.#dispatcher = new Dispatcher(
      {
        name,
        num: options.workers,
        boot: (workerId) => ({ host: true, workerId, num: options.workers, limits: options.limits }),
        timeoutMs: options.timeoutMs,
        env: undefined,
        channel: options.channel,
        logger: options.logger,
        metrics: options.metrics.stage(name),
        restarts: options.restarts,
      },
      this,
      {
        onWorkerUp: () => {
          if (this.#started) this.#reconcile();
        },
        onWorkerFree: () => this.pump(),
        onWorkerGone: (workerId) => this.#replicas.workerGone(workerId),
        onNews: (workerId, news) => {
          if (news.kind !== "metrics") this.#replicas.loadReply(workerId, news);
          else for (const model of this.#versions.values()) if (model.label === news.model) model.metrics.workerReport(workerId, news.metrics);
        },
      },
    );
    this.#replicas = new Replicas(this.pool, options, this.#log, () => this.#versions.values(), (instance) => this.#settled(instance));
  }

  /** The pool's workers. */
  get pool(): Pool<Flight> {
    return this.#dispatcher.pool;
  }

  /** Every model version, loaded or not. */
  versions(): ModelVersion[] {
    return [...this.#versions.values()];
  }

  /** Its model versions' states, replicas and memory, and its own, at scrape time. */
  report(): ModelPartGauges {
    return this.#replicas.report(this.#options.name ?? "models");
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
      this.#begin(new ShoalError("NOT_READY", `the ${this.#options.name ?? "models"} pool did not start`));
      for (const model of this.#versions.values()) model.fail(`its pool did not start: ${(err as Error).message}`);
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
    this.#replicas.drop(model.current, why);
    this.#replicas.drop(model.next, why);
    model.current = model.next = undefined;
    model.state = "unloaded";
    model.reason = "unloaded";
  }

  /** Forgets a version that is unloaded (gone from its repository). */
  remove(model: ModelVersion): void {
    if (model.state === "unloaded" && this.#versions.delete(keyOf(model.spec.name, model.spec.version))) this.#order = [...this.#versions.values()];
  }

  /** Loads again a model evicted to make room, for the requests queued meanwhile. */
  loadAgain(model: ModelVersion): void {
    void this.#load(model);
  }

  /** Stops every worker once what it runs is done; resolves when all have exited. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** Hands queued requests to free workers that have their model, until none can take more. */
  pump(): void {
    this.#dispatcher.pump();
    // Queued requests of a model being unloaded may have settled while waiting (deadline, client gone).
    for (const model of this.#versions.values()) if (model.state === "unloading") model.checkDrained();
  }

  /**
   * The next batch for a free worker: the model versions take turns, so that a busy one does not
   * starve the others; each offers its batch to the free worker that holds it and is least
   * needed by other models.
   */
  next(idle: IdleWorkers): Flight | undefined {
    const versions = this.#order;
    const isFree = (workerId: number) => idle.isIdle(workerId);
    for (let k = 0; k < versions.length; k++) {
      const at = (this.#turn + k) % versions.length;
      const model = versions[at]!;
      if (!model.serving || model.queue.queued === 0) continue;
      const instance = model.current!;
      const workerId = pickWorker(instance.workers, isFree, (w) => this.#replicas.othersWaiting(w, instance));
      if (workerId === undefined) continue;
      const tasks = model.queue.next();
      if (tasks === undefined) continue;
      this.#turn = at + 1;
      if (tasks.length > 0) {
        instance.inFlight++;
        model.lastUsed = performance.now();
      }
      return { tasks, to: instance, model: instance.key, workerId };
    }
    return undefined;
  }

  /** An old instance leaves once its last batch is back; models waiting for room try again. */
  retire(instance: Instance): void {
    this.#retire(instance.model, instance);
  }

  // Loads a version that is not loaded, or reloads one that is; resolves with the load's outcome.
  #load(model: ModelVersion): Promise<ShoalError | undefined> {
    const instance = new Instance(`${model.spec.name}:${model.spec.version}#${++this.#generation}`, model, this);
    this.#replicas.add(instance);
    const why = "a newer load replaced this one";
    const reload = model.current !== undefined && model.state === "ready";
    if (reload) {
      this.#replicas.drop(model.next, why);
      model.next = instance;
    } else {
      this.#replicas.drop(model.current, why);
      model.current = instance;
      model.state = "loading";
      model.reason = "loading";
    }
    this.#replicas.place(instance);
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
    if (model === undefined) {
      this.#versions.set(key, (model = new ModelVersion(spec, this, this.#options.capacity, this.#options.metrics)));
      this.#order = [...this.#versions.values()];
    }
    return model;
  }

  // No worker is still loading `instance`: it is ready if some worker loaded it. Its waiters
  // learn the outcome once the model's state below is set.
  #settled(instance: Instance): void {
    const model = instance.model;
    const loaded = instance.workers.size > 0;
    if (!loaded && this.#loadsAgain(instance)) return;
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
        this.#replicas.drop(instance);
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
        this.#replicas.drop(instance);
        model.current = undefined;
        model.state = "evicted";
        model.reason = `waiting for room: ${instance.failure!.message}`;
      } else {
        model.fail(instance.failure?.message ?? "no worker to load it on");
      }
    }
    this.pump();
  }

  // A first load cut short only by workers dying (a kill, the OOM killer) is not the model's
  // failure: it loads again, on another live worker or on the replacement when it is up, and its
  // waiters keep waiting. A model whose load keeps killing its worker fails after a few tries.
  #loadsAgain(instance: Instance): boolean {
    const model = instance.model;
    if (instance !== model.current || model.state !== "loading" || instance.refused || instance.interrupted === 0 || instance.interrupted > MAX_INTERRUPTED_LOADS) return false;
    instance.failure = undefined;
    model.reason = `its worker died while loading it (${instance.interrupted} of ${MAX_INTERRUPTED_LOADS + 1} tries); loading it again`;
    this.#log.warn({ model: model.label, tries: instance.interrupted }, "a worker died while loading a model; loading it again");
    this.#replicas.place(instance);
    return true;
  }

  // Brings every model that should be loaded back to its replicas (after a worker came back).
  #reconcile(): void {
    for (const model of this.#versions.values()) {
      const instance = model.current;
      if (instance === undefined || !(model.state === "ready" || model.state === "loading")) continue;
      this.#replicas.place(instance);
      // Nothing placed and nothing loaded: it does not fit the budget.
      if (instance.pending.size === 0 && instance.workers.size === 0 && instance.noRoom) this.#settled(instance);
    }
  }

  // An old instance leaves once its last batch is back. A model that had no room has requests
  // waiting: a model may be idle now, so it tries again.
  #retire(model: ModelVersion, instance: Instance): void {
    if (instance !== model.current && instance !== model.next && instance.inFlight === 0) this.#replicas.drop(instance);
    model.checkDrained();
    for (const waiting of this.#versions.values()) if (waiting.state === "evicted" && waiting.queue.queued > 0) void this.#load(waiting);
    this.pump();
  }
}

// Whether two specs load the same thing (they come from the same code, in the same key order).
function sameSpec(a: ModelSpec, b: ModelSpec): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function keyOf(name: string, version: string): string {
  return `${name}\u0000${version}`;
}
