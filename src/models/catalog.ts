import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import { ControlQueue, withDeadline, type ControlKind } from "./control-queue.js";
import type { SharedPools } from "./shared-pools.js";
import type { ModelVersion } from "./model-version.js";
import { defaultVersion, scanRepository, specsOf, type ModelSpec } from "./repository.js";
import { SettingsError, type ModelSettings } from "./settings.js";

/** Where models come from: repository folders, and models registered in code. */
export interface ModelSources {
  repositories: string[];
  /** Settings given to `Server.addModel()`, with the folder of their files. */
  models: { settings: ModelSettings; dir: string }[];
  /** The name of a model served from a repository folder that is itself one model's folder. */
  modelName?: string | undefined;
}

/** One row of the repository index (`POST /v2/repository/index`). */
export interface IndexEntry {
  name: string;
  version?: string;
  state: "READY" | "LOADING" | "UNLOADING" | "UNAVAILABLE";
  reason: string;
}

const INDEX_STATE = { ready: "READY", loading: "LOADING", unloading: "UNLOADING", failed: "UNAVAILABLE", evicted: "UNAVAILABLE", unloaded: "UNAVAILABLE" } as const;

/**
 * The models a server knows, from its sources, over the shared pool: finds a model version for
 * a request, and loads, reloads and unloads models by name. Settings files are read again on
 * each load, so that a changed file takes effect. The loads and unloads of a model run one at a
 * time (see {@link ControlQueue}), and each is answered within `controlTimeoutMs`.
 */
export class Catalog {
  /** Settings files that did not validate at the last scan, by the folder name of their model. */
  #broken = new Map<string, SettingsError>();
  readonly #control = new ControlQueue();

  constructor(
    readonly sources: ModelSources,
    readonly pool: SharedPools,
    readonly logger: Logger,
    /** How long a load or unload request waits for its outcome before it is answered 503. */
    readonly controlTimeoutMs = 60_000,
  ) {}

  /** Reads every source and registers its models with the pool (before it starts). */
  register(): void {
    for (const spec of this.#scan()) this.pool.register(spec);
  }

  /** The version `version` of `name`, or its default version; a 404 when there is none. */
  find(name: string, version: string | undefined): ModelVersion {
    const versions = this.pool.versions().filter((m) => m.spec.name === name && m.state !== "unloaded");
    if (versions.length === 0) throw new ShoalError("NOT_FOUND", `model '${name}'`);
    const wanted = version ?? defaultVersion(versions.map((m) => m.spec.version));
    const found = versions.find((m) => m.spec.version === wanted);
    if (found === undefined) throw new ShoalError("NOT_FOUND", `model '${name}' has no version '${version}'`);
    return found;
  }

  /** Every model version known, loaded or not, and every settings file that did not validate. */
  index(readyOnly: boolean): IndexEntry[] {
    const entries: IndexEntry[] = this.pool.versions().map((m) => ({
      name: m.spec.name,
      ...(m.spec.version === "" ? {} : { version: m.spec.version }),
      state: INDEX_STATE[m.state],
      reason: m.reason,
    }));
    for (const [name, error] of this.#broken) entries.push({ name, state: "UNAVAILABLE", reason: error.message });
    return readyOnly ? entries.filter((e) => e.state === "READY") : entries;
  }

  /**
   * Loads every version of `name` from its source (reloading those loaded, without dropping a
   * request), and unloads loaded versions that are no longer there. Rejects with a 404 when no
   * source has the model, a 400 when its settings are broken, a 409 when the model has too many
   * operations under way, a 503 when it is not done within the control timeout (it goes on), and
   * the load's error otherwise.
   */
  load(name: string): Promise<void> {
    return this.#queued(name, "load", () => this.#load(name));
  }

  /**
   * Unloads every version of `name` once their requests are answered; a 404 when none is loaded,
   * and a 409 or 503 as for {@link load}.
   */
  unload(name: string): Promise<void> {
    return this.#queued(name, "unload", () => this.#unload(name));
  }

  // Runs a control operation after those of the model queued before it, within the deadline.
  #queued(name: string, kind: ControlKind, operation: () => Promise<void>): Promise<void> {
    const ms = this.controlTimeoutMs;
    const late = () => new ShoalError("NOT_READY", `the ${kind} of model '${name}' is still under way after ${ms} ms; it goes on, and the repository index shows its state`);
    return withDeadline(this.#control.run(name, kind, operation), ms, late);
  }

  async #load(name: string): Promise<void> {
    const specs = this.#scan().filter((s) => s.name === name);
    const broken = this.#broken.get(name);
    if (specs.length === 0) throw broken === undefined ? new ShoalError("NOT_FOUND", `model '${name}'`) : new ShoalError("BAD_REQUEST", broken.message);
    const versions = new Set(specs.map((s) => s.version));
    const gone = this.pool.versions().filter((m) => m.spec.name === name && !versions.has(m.spec.version));
    await Promise.all(specs.map((spec) => this.pool.load(spec)));
    await Promise.all(gone.map(async (m) => {
      await this.pool.unload(m);
      this.pool.remove(m);
    }));
  }

  async #unload(name: string): Promise<void> {
    const loaded = this.pool.versions().filter((m) => m.spec.name === name && m.state !== "unloaded");
    if (loaded.length === 0) throw new ShoalError("NOT_FOUND", `model '${name}' is not loaded`);
    await Promise.all(loaded.map((m) => this.pool.unload(m)));
  }

  // Every model version of every source. Settings that do not validate are logged and kept for
  // the index; the other models are not held back by them.
  #scan(): ModelSpec[] {
    const specs: ModelSpec[] = [];
    this.#broken = new Map();
    for (const root of this.sources.repositories) {
      const { specs: found, errors } = scanRepository(root, this.sources.modelName);
      specs.push(...found);
      for (const error of errors) {
        this.logger.error(error.message);
        this.#broken.set(error.folder, error);
      }
    }
    for (const { settings, dir } of this.sources.models) {
      try {
        specs.push(...specsOf(settings, dir, `model ${settings.name}`));
      } catch (err) {
        if (!(err instanceof SettingsError)) throw err;
        this.logger.error(err.message);
        this.#broken.set(settings.name, err);
      }
    }
    return specs;
  }
}
