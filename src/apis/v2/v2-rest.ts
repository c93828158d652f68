import { readFileSync } from "node:fs";
import type { HttpRequest, HttpResponse } from "../../http/http-message.js";
import { ShoalError } from "../../errors.js";
import type { Catalog } from "../../models/catalog.js";
import type { ModelVersion } from "../../models/model-version.js";
import type { Step } from "../../scheduling/task.js";
import type { TensorMetadata } from "../../v2/types.js";
import { sendError, sendJson } from "../../http/send.js";
import { readBody } from "../../http/body.js";
import { GenerateDialect, INFER_STREAM } from "./generate.js";
import type { Delegate, Intake } from "../../http/intake.js";
import type { CorsScope } from "../../http/cors.js";
import { RouteModel } from "../../serving/route-model.js";

/** What `GET /v2` lists: the protocol extensions this server speaks. */
export const EXTENSIONS = ["binary_tensor_data", "model_repository", "model_configuration", "statistics"] as const;

// /v2/models/{m}[/versions/{v}][/{action}]: action is "" (metadata), ready, config, stats, or an inference.
const MODEL_PATH = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?(?:\/(ready|infer|infer_stream|generate|generate_stream|config|stats))?$/;
const INFERENCES = new Set(["infer", "infer_stream", "generate", "generate_stream"]);
// A control request: /v2/repository/models/{m}/load or .../unload.
const CONTROL_PATH = /^\/v2\/repository\/models\/([^/]+)\/(load|unload)$/;
// Control bodies (the index's `{"ready": true}`) are small; anything larger is refused.
const CONTROL_BODY_BYTES = 64 * 1024;

/** `GET /v2` (and gRPC's ServerMetadata): this server's name, Shoal's version, and the extensions. */
export const SERVER_METADATA = {
  name: "shoal",
  version: (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version,
  extensions: EXTENSIONS,
};

/**
 * The V2 Open Inference Protocol over REST, under `/v2`: health, server and model metadata,
 * inference, and the model repository, configuration and statistics extensions. Inference
 * bodies go to a worker as bytes, with their `Inference-Header-Content-Length`; the coordinator
 * decodes none of them.
 */
export class V2Handler implements Delegate {
  readonly prefix = "/v2";
  /** Each model version's canonical path of each inference action, by its label and action. */
  readonly #paths = new Map<string, string>();

  constructor(
    /** The models of the shared pool, when there are any. */
    readonly catalog: Catalog | undefined,
    /** Routes of stages served as V2 models, by name. */
    readonly routeModels: ReadonlyMap<string, RouteModel>,
    /** Why the server is not ready, or undefined. */
    readonly notReady: () => string | undefined,
    /** What the HTTP front lends: accepting an inference request, and its guards. */
    readonly front: Intake,
  ) {}

  /** Load and unload answer only origins listed by name; every other V2 path, any allowed origin. */
  corsScope(path: string): CorsScope {
    return CONTROL_PATH.test(path) ? "control" : "open";
  }

  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string, arrival: number): void {
    try {
      this.#route(req, res, path, requestId, arrival);
    } catch (err) {
      if (!(err instanceof ShoalError)) throw err;
      sendError(res, requestId, err, err instanceof NotAllowed ? { allow: err.allow } : undefined);
    }
  }

  #route(req: HttpRequest, res: HttpResponse, path: string, requestId: string, arrival: number): void {
    const ok = (value: unknown) => sendJson(res, requestId, 200, value);
    if (path === "/v2" || path === "/v2/") {
      get(req, path);
      ok(SERVER_METADATA);
      return;
    }
    if (path === "/v2/health/live") {
      get(req, path);
      ok({ live: true });
      return;
    }
    if (path === "/v2/health/ready") {
      get(req, path);
      const reason = this.front.draining ? "shutting down" : this.notReady();
      if (reason !== undefined) throw new ShoalError("NOT_READY", reason);
      ok({ ready: true });
      return;
    }
    if (path === "/v2/models/stats") {
      get(req, path);
      ok({ model_stats: (this.catalog?.pool.versions() ?? []).map((m) => m.stats.report(m.spec.name, m.spec.version)) });
      return;
    }
    if (path === "/v2/repository/index") {
      post(req, path);
      this.#control(req, res, requestId, (body) => ok(this.catalog?.index(body.ready === true) ?? []));
      return;
    }
    const repository = CONTROL_PATH.exec(path);
    if (repository !== null) {
      post(req, path);
      const refused = this.front.access.control(req.headers.origin, req.headers.authorization);
      if (refused !== undefined) {
        sendError(res, requestId, refused.error, refused.headers);
        return;
      }
      const [, name, action] = repository as unknown as [string, string, "load" | "unload"];
      const model = decodeSegment(name);
      const catalog = this.#repository(model);
      this.#control(req, res, requestId, () => {
        (action === "load" ? catalog.load(model) : catalog.unload(model)).then(
          () => ok({}),
          (err: unknown) => (err instanceof ShoalError ? sendError(res, requestId, err) : this.front.unexpected(err, res, requestId)),
        );
      });
      return;
    }
    const match = MODEL_PATH.exec(path);
    if (match === null) throw new ShoalError("NOT_FOUND", path);
    const [, rawName, rawVersion, action = ""] = match;
    const name = decodeSegment(rawName!);
    const version = rawVersion === undefined ? undefined : decodeSegment(rawVersion);
    if (INFERENCES.has(action)) {
      this.#infer(req, res, requestId, arrival, name, version, action);
      return;
    }
    get(req, path);
    const target = this.find(name, version);
    if (target instanceof RouteModel) {
      if (action === "ready") {
        const reason = target.notReady();
        if (reason !== undefined) throw new ShoalError("NOT_READY", reason);
        ok({ name, ready: true });
      } else ok(action === "config" ? target.config() : action === "stats" ? { model_stats: [] } : target.metadata());
      return;
    }
    const model = target;
    if (action === "ready") {
      if (!model.ready) throw new ShoalError("NOT_READY", `model ${model.label} is not ready: ${model.reason}`);
      ok({ name, ready: true });
    } else if (action === "config") {
      ok({ ...model.spec.settings, name });
    } else if (action === "stats") {
      ok({ model_stats: [model.stats.report(model.spec.name, model.spec.version)] });
    } else {
      ok(this.metadataOf(model));
    }
  }

  /** The model version `version` of `name` (its default version when undefined), or the route served as model `name`; 404 when there is none. */
  find(name: string, version: string | undefined): ModelVersion | RouteModel {
    const routeModel = this.routeModels.get(name);
    if (routeModel !== undefined) return routeModel.version(version);
    return this.#repository(name).find(name, version);
  }

  /** Model metadata of a model version or of a route served as a model. */
  metadataOf(target: ModelVersion | RouteModel): ReturnType<RouteModel["metadata"]> {
    return target instanceof RouteModel ? target.metadata() : modelMetadata(this.catalog!, target);
  }

  /** The steps an inference request for it takes: the model version, or the route's stages. */
  stepsOf(target: ModelVersion | RouteModel): readonly Step[] {
    return target instanceof RouteModel ? target.route.stages : [target];
  }

  // The catalog, for a request about model `name`: without one, no such model.
  #repository(name: string): Catalog {
    if (this.catalog === undefined) throw new ShoalError("NOT_FOUND", `model '${name}'`);
    return this.catalog;
  }

  /**
   * A model's canonical path of an inference action (`infer`, `generate`, ...): its requests are
   * answered and counted under it, whatever way they came.
   */
  inferPath(target: ModelVersion | RouteModel, action = "infer"): string {
    if (target instanceof RouteModel) return action === "infer" ? target.path : `/v2/models/${target.name}/${action}`;
    const key = `${target.label} ${action}`;
    let path = this.#paths.get(key);
    if (path === undefined) this.#paths.set(key, (path = `/v2/models/${target.spec.name}${target.spec.version === "" ? "" : `/versions/${target.spec.version}`}/${action}`));
    return path;
  }

  #infer(req: HttpRequest, res: HttpResponse, requestId: string, arrival: number, name: string, version: string | undefined, action: string): void {
    // The model is looked up first, so that an unknown one is a 404 whatever the method.
    const target = this.find(name, version);
    // The generate extension types a request's fields by the model's inputs, as far as it knows them yet.
    const inputs = () => (target instanceof RouteModel ? target.metadata().inputs : (target.metadata?.inputs ?? []));
    const dialect = action === "infer" ? undefined : action === "infer_stream" ? INFER_STREAM : new GenerateDialect(inputs(), action === "generate_stream");
    this.front.accept(this.inferPath(target, action), this.stepsOf(target), req, res, requestId, arrival, dialect);
  }

  // Reads a small JSON control body (empty is `{}`) and hands it over.
  #control(req: HttpRequest, res: HttpResponse, requestId: string, then: (body: Record<string, unknown>) => void): void {
    if (this.front.draining) throw new ShoalError("SHUTTING_DOWN", "the server is shutting down");
    readBody(
      req,
      CONTROL_BODY_BYTES,
      ({ bytes }) =>
        this.front.guard(res, requestId, () => {
          let body: unknown = {};
          try {
            if (bytes.byteLength > 0) body = JSON.parse(Buffer.from(bytes).toString("utf8"));
          } catch (err) {
            sendError(res, requestId, new ShoalError("BAD_REQUEST", `the body is not JSON: ${(err as Error).message}`));
            return;
          }
          if (typeof body !== "object" || body === null || Array.isArray(body)) {
            sendError(res, requestId, new ShoalError("BAD_REQUEST", "the body must be a JSON object"));
            return;
          }
          then(body as Record<string, unknown>);
        }),
      (close) => sendError(res, requestId, new ShoalError("BODY_TOO_LARGE", `the limit is ${CONTROL_BODY_BYTES} bytes`), close ? { connection: "close" } : undefined),
    );
  }
}

/** Model metadata, as its workers reported it when they last loaded it; 503 before it has loaded. */
export function modelMetadata(catalog: Catalog, model: ModelVersion): { name: string; versions: string[]; platform: string; inputs: TensorMetadata[]; outputs: TensorMetadata[] } {
  const metadata = model.metadata;
  if (metadata === undefined) throw new ShoalError("NOT_READY", `model ${model.label} has not loaded yet: ${model.reason}`);
  const versions = catalog.pool.versions().filter((m) => m.spec.name === model.spec.name && m.spec.version !== "" && m.state !== "unloaded");
  return { name: model.spec.name, versions: versions.map((m) => m.spec.version), platform: metadata.platform, inputs: metadata.inputs, outputs: metadata.outputs };
}

/** A 405, with the methods the path takes for its `Allow` header. */
class NotAllowed extends ShoalError {
  constructor(
    req: HttpRequest,
    path: string,
    readonly allow: string,
  ) {
    super("METHOD_NOT_ALLOWED", `${req.method} ${path}; use ${allow.split(",")[0]}`);
  }
}

// A path segment, percent-decoded; a malformed escape is the client's mistake (400), not ours.
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ShoalError("BAD_REQUEST", `malformed percent-encoding in the path: '${segment.slice(0, 100)}'`);
  }
}

function get(req: HttpRequest, path: string): void {
  if (req.method !== "GET" && req.method !== "HEAD") throw new NotAllowed(req, path, "GET, HEAD");
}

function post(req: HttpRequest, path: string): void {
  if (req.method !== "POST") throw new NotAllowed(req, path, "POST");
}
