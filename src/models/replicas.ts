import { ShoalError, errorFromWire } from "../errors.js";
import type { Logger } from "../logger.js";
import type { ModelPartGauges } from "../metrics/registry.js";
import type { LoadFailedMessage, LoadedMessage, ToWorker } from "../workers/messages.js";
import type { Instance, ModelVersion } from "./model-version.js";
import { makeRoom, placeReplicas, type WorkerLoad } from "./placement.js";

/** The workers of the shared pool, as replicas see them. */
export interface HostWorkers {
  /** The ids of the workers started and alive. */
  liveWorkers(): number[];
  /** Sends a load or an unload to a live worker. */
  send(workerId: number, message: ToWorker): void;
}

/** What replicas are bounded by. */
export interface ReplicaLimits {
  /** Workers in the pool: how many may share the cores. */
  workers: number;
  /** What all loaded replicas may cost together, in bytes (Infinity: no budget). */
  memoryBytes: number;
}

/**
 * Which worker of the shared pool holds which model instance: loads replicas where the pure
 * placement says, evicts idle models to keep within the memory budget, unloads instances, and
 * follows workers that die. When no worker is loading an instance any more, `settled` hears it.
 */
export class Replicas {
  readonly #instances = new Map<string, Instance>();
  /** The instances each worker holds or is loading. */
  readonly #hosted = new Map<number, Set<Instance>>();

  readonly #pool: HostWorkers;
  readonly #options: ReplicaLimits;
  readonly #log: Logger;
  readonly #versions: () => Iterable<ModelVersion>;
  readonly #settled: (instance: Instance) => void;

  /** `versions`: every model version, for eviction. */
  constructor(pool: HostWorkers, options: ReplicaLimits, log: Logger, versions: () => Iterable<ModelVersion>, settled: (instance: Instance) => void) {
    this.#pool = pool;
    this.#options = options;
    this.#log = log;
    this.#versions = versions;
    this.#settled = settled;
  }

  /** Starts following a new instance; `place` loads it. */
  add(instance: Instance): void {
    this.#instances.set(instance.key, instance);
  }

  /** Worker `workerId` is gone: its instances lose it, and a load on it fails. */
  workerGone(workerId: number): void {
    const lost = this.#hosted.get(workerId) ?? new Set();
    this.#hosted.delete(workerId);
    for (const instance of lost) {
      instance.workers.delete(workerId);
      instance.metrics.workerReport(workerId, undefined);
      const model = instance.model;
      if (instance === model.current && instance.workers.size === 0 && model.state === "ready") {
        // Its requests wait in its queue while the replacement loads it.
        model.state = "loading";
        model.reason = "its workers died; loading it on their replacements";
      }
      if (instance.pending.delete(workerId)) {
        instance.interrupted++;
        instance.failure ??= new ShoalError("NOT_READY", "the worker died while loading it");
        if (instance.pending.size === 0) this.#settled(instance);
      }
    }
    this.#log.warn({ worker: workerId, models: [...lost].map((i) => i.model.label) }, "a worker of the shared pool died; its models load again on its replacement");
  }

  /** A model host answered a load. */
  loadReply(workerId: number, news: LoadedMessage | LoadFailedMessage): void {
    const instance = this.#instances.get(news.model);
    if (instance === undefined || !instance.pending.delete(workerId)) return;
    if (news.kind === "loaded") {
      instance.workers.add(workerId);
      instance.metadata = { platform: news.platform, inputs: news.inputs, outputs: news.outputs, ...(news.stream === undefined ? {} : { stream: news.stream }), ...(news.runtimeVersion === undefined ? {} : { runtimeVersion: news.runtimeVersion }), ...(news.handlers === undefined ? {} : { handlers: news.handlers }), ...(news.answer === undefined ? {} : { answer: news.answer }) };
      this.#log.debug({ model: instance.model.label, worker: workerId }, "model replica loaded");
    } else {
      this.#hosted.get(workerId)?.delete(instance);
      instance.refused = true;
      instance.failure = errorFromWire(news.error);
      this.#log.error({ model: instance.model.label, worker: workerId, err: news.error.stack ?? news.error.message }, "model failed to load");
    }
    if (instance.pending.size === 0) this.#settled(instance);
  }

  /**
   * Loads `instance` on as many more workers as its model's replicas ask, choosing the workers
   * that hold the fewest bytes (then the fewest models), evicting idle models to keep within
   * the memory budget.
   */
  place(instance: Instance): void {
    const { spec } = instance.model;
    const live = this.#pool.liveWorkers();
    const want = Math.min(spec.replicas, live.length) - instance.workers.size - instance.pending.size;
    const candidates = live.filter((w) => !instance.workers.has(w) && !instance.pending.has(w)).map((w) => this.#loadOf(w));
    for (const workerId of placeReplicas(candidates, want)) {
      if (!this.#makeRoom(spec.costBytes, instance.model)) {
        instance.noRoom = true;
        instance.failure = new ShoalError("NOT_READY", `its ${spec.costBytes} bytes do not fit in the pool's memory budget of ${this.#options.memoryBytes} bytes beside the models in use`);
        break;
      }
      instance.pending.add(workerId);
      this.#hostedOn(workerId).add(instance);
      this.#pool.send(workerId, {
        kind: "load",
        model: instance.key,
        name: spec.name,
        version: spec.version,
        runtime: spec.runtime,
        dir: spec.dir,
        ...(spec.file === undefined ? {} : { file: spec.file }),
        ...(spec.class === undefined ? {} : { class: spec.class }),
        ...(spec.mlserver === undefined ? {} : { mlserver: spec.mlserver }),
        maxBatchSize: spec.maxBatchSize,
        workers: this.#options.workers,
        parameters: spec.parameters,
        ...(spec.inputs === undefined ? {} : { inputs: spec.inputs }),
        ...(spec.outputs === undefined ? {} : { outputs: spec.outputs }),
      });
    }
  }

  // Evicts the least recently used idle models until `bytes` more fit in the budget. False if
  // they cannot.
  #makeRoom(bytes: number, forModel: ModelVersion): boolean {
    let used = 0;
    for (const n of this.#bytesByModel().values()) used += n;
    const idle = [...this.#versions()]
      .filter((m) => m !== forModel && m.state === "ready" && m.queue.queued === 0 && m.current!.inFlight === 0 && m.next === undefined)
      .map((model) => ({ model, bytes: model.spec.costBytes * model.current!.workers.size, lastUsed: model.lastUsed }));
    const room = makeRoom(used, bytes, this.#options.memoryBytes, idle);
    for (const model of room.evict) {
      this.drop(model.current);
      model.current = undefined;
      model.state = "evicted";
      model.reason = "evicted to make room; loads again on its next request";
      model.lifecycle.evicted();
      this.#log.info({ model: model.label, forModel: forModel.label }, "model evicted");
    }
    return room.fits;
  }

  /**
   * Unloads an instance from its workers and forgets it. If its load was still under way, its
   * waiters are answered 409 with `why`.
   */
  drop(instance: Instance | undefined, why = "its load was cancelled"): void {
    if (instance === undefined) return;
    instance.done(new ShoalError("CONFLICT", `model ${instance.model.label}: ${why}`));
    if (!this.#instances.delete(instance.key)) return;
    for (const workerId of [...instance.workers, ...instance.pending]) {
      this.#hosted.get(workerId)?.delete(instance);
      this.#pool.send(workerId, { kind: "unload", model: instance.key });
      instance.metrics.workerReport(workerId, undefined);
    }
    instance.workers.clear();
    instance.pending.clear();
  }

  /** The part `pool` of the shared pool at scrape time: its versions, and memory as the budget counts it. */
  report(pool: string): ModelPartGauges {
    const bytes = this.#bytesByModel();
    let used = 0;
    for (const n of bytes.values()) used += n;
    return { pool, usedBytes: used, budgetBytes: this.#options.memoryBytes, models: [...this.#versions()].map((m) => m.gauges(bytes.get(m) ?? 0)) };
  }

  // What each model's replicas cost, those loading included: what the budget counts.
  #bytesByModel(): Map<ModelVersion, number> {
    const bytes = new Map<ModelVersion, number>();
    for (const instances of this.#hosted.values()) for (const { model } of instances) bytes.set(model, (bytes.get(model) ?? 0) + model.spec.costBytes);
    return bytes;
  }

  /** Requests queued for the models a worker holds besides `instance`'s. */
  othersWaiting(workerId: number, instance: Instance): number {
    let waiting = 0;
    for (const other of this.#hostedOn(workerId)) if (other !== instance) waiting += other.model.queue.queued;
    return waiting;
  }

  #loadOf(workerId: number): WorkerLoad {
    let bytes = 0;
    const hosted = this.#hostedOn(workerId);
    for (const instance of hosted) bytes += instance.model.spec.costBytes;
    return { workerId, bytes, models: hosted.size };
  }

  #hostedOn(workerId: number): Set<Instance> {
    let set = this.#hosted.get(workerId);
    if (set === undefined) this.#hosted.set(workerId, (set = new Set()));
    return set;
  }
}
