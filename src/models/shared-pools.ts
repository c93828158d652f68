import type { Logger } from "../logger.js";
import type { ModelPartGauges } from "../metrics/registry.js";
import type { Flight } from "../scheduling/dispatcher.js";
import type { Pool } from "../workers/pool.js";
import type { ModelPool } from "./model-pool.js";
import type { ModelVersion } from "./model-version.js";
import { isPythonRuntime, type ModelSpec } from "./repository.js";

/** One part of the shared pool, for readiness and the back-off gauge. */
export interface PoolPart {
  label: string;
  /** Its `stage` label in the metrics. */
  gauge: string;
  workers: Pool<Flight>;
}

/**
 * The shared pool by runtime: the Node.js workers (`--workers`, threads or processes) host the
 * TypeScript, ONNX and llama.cpp models, and Python processes (`--python-workers`) host the models
 * of a Python runtime (`"python"`, `"mlserver"`). The Python part is started the first time it
 * is needed: at start-up when the repository has a Python model, else on the first load of one.
 * Each part places its models on its own workers, batches them, and keeps them within the memory
 * budget by evicting its own idle ones (placement.ts); a model lives in the part of its runtime.
 */
export class SharedPools {
  readonly #node: ModelPool;
  readonly #makePython: () => ModelPool;
  readonly #log: Logger;
  #python: ModelPool | undefined;
  /** The Python part has started; or it could not. */
  #live = false;
  #failed = false;
  #started = false;

  constructor(node: ModelPool, makePython: () => ModelPool, logger: Logger) {
    this.#node = node;
    this.#makePython = makePython;
    this.#log = logger;
  }

  /** Every model version of both parts, loaded or not. */
  versions(): ModelVersion[] {
    return [...this.#node.versions(), ...(this.#python?.versions() ?? [])];
  }

  /** Why the pool is not ready (a model that should be loaded is not), or undefined. */
  notReady(): string | undefined {
    return this.#node.notReady() ?? this.#python?.notReady();
  }

  /** Each part's model versions and memory at scrape time: the Python one once it is made. */
  report(): ModelPartGauges[] {
    return [this.#node.report(), ...(this.#python === undefined ? [] : [this.#python.report()])];
  }

  /** The parts whose workers readiness counts: the Python one once it has started. */
  parts(): PoolPart[] {
    const parts: PoolPart[] = [{ label: "the shared model pool", gauge: "models", workers: this.#node.pool }];
    if (this.#python !== undefined && this.#live) parts.push({ label: "the Python model pool", gauge: "python-models", workers: this.#python.pool });
    return parts;
  }

  /** Adds a model version to be loaded when its part starts. */
  register(spec: ModelSpec): void {
    this.#part(spec).register(spec);
  }

  /**
   * Starts the Node.js part, and the Python part when a model of it is registered, then loads
   * every model. A Python part that cannot start fails its models alone (they say why); the
   * others are served.
   */
  async start(): Promise<void> {
    this.#started = true;
    const python = this.#python === undefined ? undefined : this.#startPython(this.#python);
    await Promise.all([this.#node.start(), python]);
  }

  /** Loads (or reloads) a model version in the part of its runtime, starting that part first if need be. */
  load(spec: ModelSpec): Promise<void> {
    return this.#part(spec).load(spec);
  }

  /** Unloads a version from its part once its requests are answered. */
  unload(model: ModelVersion): Promise<void> {
    return this.#owner(model).unload(model);
  }

  /** Forgets an unloaded version. */
  remove(model: ModelVersion): void {
    this.#owner(model).remove(model);
  }

  /** Stops the workers of both parts once what they run is done. */
  async close(): Promise<void> {
    await Promise.all([this.#node.close(), this.#python?.close()]);
  }

  #owner(model: ModelVersion): ModelPool {
    return isPythonRuntime(model.spec.runtime) && this.#python !== undefined ? this.#python : this.#node;
  }

  // The part of a spec's runtime. The Python part is made when first needed, and started at once
  // when the server runs already; one that failed to start is made again for the next load.
  #part(spec: ModelSpec): ModelPool {
    if (!isPythonRuntime(spec.runtime)) return this.#node;
    if (this.#python === undefined || this.#failed) {
      void this.#python?.close();
      this.#python = this.#makePython();
      this.#failed = this.#live = false;
      if (this.#started) void this.#startPython(this.#python);
    }
    return this.#python;
  }

  // Its models say why it did not start in the index, and fail their requests.
  #startPython(pool: ModelPool): Promise<void> {
    return pool.start().then(
      () => {
        if (this.#python === pool) this.#live = true;
      },
      (err: Error) => {
        this.#log.error({ err: err.message }, "the Python workers of the shared pool did not start; their models are unavailable");
        if (this.#python === pool) this.#failed = true;
        void pool.close();
      },
    );
  }
}
