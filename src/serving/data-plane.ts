import { readFileSync } from "node:fs";
import { ShoalError, type ErrorDialect } from "../errors.js";
import type { Catalog } from "../models/catalog.js";
import type { ModelVersion } from "../models/model-version.js";
import type { Step } from "../scheduling/task.js";
import type { TensorMetadata } from "../v2/types.js";
import type { V2Identity } from "../worker.js";
import type { CustomHandler } from "../workers/messages.js";
import type { AccessPolicy, Refusal } from "./access-policy.js";
import { shuttingDown, type Admission } from "./admission.js";
import { RouteModel } from "./route-model.js";
import { MLSERVER_RUNTIME, isMLServerModel, mlserverNotFound, mlserverMetadata } from "./mlserver-answers.js";

/** The protocol extensions this server speaks (`GET /v2`, gRPC's ServerMetadata). */
export const EXTENSIONS = ["binary_tensor_data", "model_repository", "model_configuration", "statistics"] as const;

/** This server's name, Shoal's version, and the extensions. */
export const SERVER_METADATA = {
  name: "shoal",
  version: (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version,
  extensions: EXTENSIONS,
};

/** What a V2 request is for: a model version of the shared pool, or a route served as a model. */
export type V2Target = ModelVersion | RouteModel;

/** Server metadata as the V2 protocol gives it. */
export interface ServerMetadata {
  name: string;
  version: string;
  extensions: readonly string[];
}

/** Model metadata as the V2 protocol gives it. */
export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

/**
 * The V2 protocol's data plane, whatever door its requests come through (REST, gRPC): finding a
 * model, its steps and canonical paths, metadata, readiness, statistics, the repository index,
 * and load and unload under the access policy. Doors turn their wire into these calls; the
 * answers are the protocol's values, which each door writes in its own form.
 */
export class V2DataPlane {
  /** Each model version's canonical path of each inference action, by its label and action. */
  readonly #paths = new Map<string, string>();
  /** What each target's requests say they are for, made once per target. */
  readonly #identities = new WeakMap<V2Target, V2Identity>();

  constructor(
    /** The models of the shared pool, when there are any. */
    readonly catalog: Catalog | undefined,
    /** Routes of stages served as V2 models, by name. */
    readonly routeModels: ReadonlyMap<string, RouteModel>,
    /** Why the server is not ready ("shutting down" included), or undefined. */
    readonly notReady: () => string | undefined,
    readonly access: AccessPolicy,
    readonly admission: Admission,
  ) {}

  /** The model version `version` of `name` (its default version when undefined or ""), or the route served as model `name`; 404 when there is none. */
  find(name: string, version: string | undefined): V2Target {
    const routeModel = this.routeModels.get(name);
    if (routeModel !== undefined) return routeModel.version(version);
    try {
      return this.#repository(name).find(name, version === "" ? undefined : version);
    } catch (err) {
      throw this.#worded(err, name, version);
    }
  }

  /**
   * The words errors about model `name` are put in: MLServer's for a model in its format, and
   * for a name the server does not know when every model it has is one (an MLServer
   * repository); Shoal's otherwise.
   */
  dialectOf(name: string): ErrorDialect {
    if (this.catalog === undefined || this.routeModels.has(name)) return "shoal";
    const versions = this.catalog.pool.versions();
    const own = versions.filter((m) => m.spec.name === name);
    if (own.length > 0) return own.some(isMLServerModel) ? "mlserver" : "shoal";
    return this.#mlserverOnly(versions) ? "mlserver" : "shoal";
  }

  /** The words of errors for a request that found `target`. */
  dialectOfTarget(target: V2Target): ErrorDialect {
    // Asked of every request: the runtime compared here, with no call.
    return target instanceof RouteModel || target.spec.runtime !== MLSERVER_RUNTIME ? "shoal" : "mlserver";
  }

  /**
   * `GET /v2` and gRPC's ServerMetadata: Shoal's name, version and extensions, or, for an
   * MLServer repository (no other models, no routes served as models), what MLServer answers
   * (its tests check it): `server_name`, `server_version` (the mlserver package's) and
   * `extensions` of its settings, no extensions by default.
   */
  serverMetadata(): ServerMetadata {
    const versions = this.catalog?.pool.versions() ?? [];
    if (this.routeModels.size > 0 || !this.#mlserverOnly(versions)) return SERVER_METADATA;
    return mlserverMetadata(this.catalog!.sources.repositories, versions);
  }

  /** Why a model (or route served as one) is not ready, or undefined when it is. */
  modelNotReady(target: V2Target): string | undefined {
    if (target instanceof RouteModel) return target.notReady();
    return target.ready ? undefined : `model ${target.label} is not ready: ${target.reason}`;
  }

  /**
   * The MLServer model whose custom handler (`@custom_handler(rest_path=...)`) answers `path`,
   * with its handlers there by method: the first ready model that declares the path (MLServer
   * too serves one handler per path and method), or undefined when no loaded model does.
   */
  customHandler(path: string): { target: ModelVersion; handlers: CustomHandler[] } | undefined {
    // Asked for every path no route or API has (a 404 flood's too): a model without handlers
    // costs a test, and nothing is allocated until one matches.
    for (const model of this.catalog?.pool.versions() ?? []) {
      const all = model.ready ? model.metadata?.handlers : undefined;
      if (all !== undefined && all.some((h) => h.path === path)) return { target: model, handlers: all.filter((h) => h.path === path) };
    }
    return undefined;
  }

  /** Model metadata, as its workers reported it when they last loaded it; 503 before it has loaded. */
  metadataOf(target: V2Target): ModelMetadata {
    if (target instanceof RouteModel) return target.metadata();
    const metadata = target.metadata;
    if (metadata === undefined) throw new ShoalError("NOT_READY", `model ${target.label} has not loaded yet: ${target.reason}`);
    // An MLServer model's metadata is its own (its settings' free-form `versions`); Shoal's lists the versions loaded.
    if (metadata.answer !== undefined) return metadata.answer as unknown as ModelMetadata;
    const versions = this.catalog!.pool.versions().filter((m) => m.spec.name === target.spec.name && m.spec.version !== "" && m.state !== "unloaded").map((m) => m.spec.version);
    return { name: target.spec.name, versions, platform: metadata.platform, inputs: metadata.inputs, outputs: metadata.outputs };
  }

  /** The statistics of one model, or of every model of the pool when `target` is undefined (a route served as a model has none). */
  statistics(target?: V2Target): Record<string, unknown>[] {
    const models = target === undefined ? (this.catalog?.pool.versions() ?? []) : [target];
    return models.flatMap((m) => (m instanceof RouteModel ? [] : [m.stats.report(m.spec.name, m.spec.version)]));
  }

  /** The repository index: every model's versions, states and reasons (only those ready with `ready`). */
  index(ready: boolean): ReturnType<Catalog["index"]> {
    return this.catalog?.index(ready) ?? [];
  }

  /** What a request for it says it is for, as its items carry it to the workers (`meta.v2`). */
  identityOf(target: V2Target): V2Identity {
    let identity = this.#identities.get(target);
    if (identity === undefined) {
      identity = target instanceof RouteModel || target.spec.version === "" ? { model: target instanceof RouteModel ? target.name : target.spec.name } : { model: target.spec.name, version: target.spec.version };
      this.#identities.set(target, identity);
    }
    return identity;
  }

  /** The steps an inference request for it takes: the model version, or the route's stages. */
  stepsOf(target: V2Target): readonly Step[] {
    return target instanceof RouteModel ? target.route.stages : [target];
  }

  /**
   * A model's canonical path of an inference action (`infer`, `generate`, ...): its requests are
   * answered and counted under it, whatever door they came through.
   */
  inferPath(target: V2Target, action = "infer"): string {
    if (target instanceof RouteModel) return action === "infer" ? target.path : `/v2/models/${target.name}/${action}`;
    const key = `${target.label} ${action}`;
    let path = this.#paths.get(key);
    if (path === undefined) this.#paths.set(key, (path = `/v2/models/${target.spec.name}${target.spec.version === "" ? "" : `/versions/${target.spec.version}`}/${action}`));
    return path;
  }

  /**
   * Why a control request (load, unload) with these credentials is refused: the server shutting
   * down, model control off, an origin not listed, a wrong token; undefined when it may go on.
   */
  mayControl(origin: string | undefined, authorization: string | undefined): Refusal | undefined {
    if (this.admission.draining) return { error: shuttingDown() };
    return this.access.control(origin, authorization);
  }

  /** Loads (or reloads) or unloads the model `name`, once {@link mayControl} let it. */
  control(action: "load" | "unload", name: string): Promise<void> {
    const catalog = this.#repository(name);
    return (action === "load" ? catalog.load(name) : catalog.unload(name)).catch((err: unknown) => {
      throw this.#worded(err, name, undefined);
    });
  }

  // Every model is in MLServer's format, and there is one at least.
  #mlserverOnly(versions: readonly ModelVersion[]): boolean {
    return versions.length > 0 && versions.every(isMLServerModel);
  }

  // A 404 about `name` in MLServer's words, when its errors are put in them.
  #worded(err: unknown, name: string, version: string | undefined): unknown {
    if (!(err instanceof ShoalError) || err.code !== "NOT_FOUND" || this.dialectOf(name) !== "mlserver") return err;
    return new ShoalError("NOT_FOUND", mlserverNotFound(name, version));
  }

  // The catalog, for a request about model `name`: without one, no such model.
  #repository(name: string): Catalog {
    if (this.catalog === undefined) throw new ShoalError("NOT_FOUND", `model '${name}'`);
    return this.catalog;
  }
}
