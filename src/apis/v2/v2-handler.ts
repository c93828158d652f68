import type { HttpRequest, HttpResponse } from "../../http/http-message.js";
import { ShoalError } from "../../errors.js";
import type { V2DataPlane } from "../../serving/data-plane.js";
import { sendError, sendFailure, sendJson } from "../../http/send.js";
import type { Dialect } from "../../http/dialect.js";
import { MLSERVER_INFER, MLSERVER_STREAM } from "./mlserver-dialect.js";
import { readBody } from "../../http/body.js";
import { GenerateDialect, INFER_STREAM } from "./generate.js";
import type { Delegate, DelegateParts, Inference } from "../../http/intake.js";
import type { CorsScope } from "../../http/cors.js";
import { RouteModel } from "../../serving/route-model.js";
import { shuttingDown } from "../../serving/admission.js";
import { parseJsonObject } from "../../codecs.js";

// /v2/models/{m}[/versions/{v}][/{action}]: action is "" (metadata), ready, config, stats, or an inference.
const MODEL_PATH = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?(?:\/(ready|infer|infer_stream|generate|generate_stream|config|stats))?$/;
const INFERENCES = new Set(["infer", "infer_stream", "generate", "generate_stream"]);
// A control request: /v2/repository/models/{m}/load or .../unload.
const CONTROL_PATH = /^\/v2\/repository\/models\/([^/]+)\/(load|unload)$/;
// Control bodies (the index's `{"ready": true}`) are small; anything larger is refused.
const CONTROL_BODY_BYTES = 64 * 1024;

/**
 * The V2 Open Inference Protocol over REST, under `/v2`: health, server and model metadata,
 * inference, and the model repository, configuration and statistics extensions, each path a
 * call of the V2 data plane. Inference bodies go to a worker as bytes, with their
 * `Inference-Header-Content-Length`; the coordinator decodes none of them.
 */
export class V2Handler implements Delegate {
  readonly prefix = "/v2";

  constructor(
    readonly plane: V2DataPlane,
    /** What the HTTP door lends: the admission (draining) and the guard of callbacks. */
    readonly door: DelegateParts,
  ) {}

  /** Load and unload answer only origins listed by name; every other V2 path, any allowed origin. */
  corsScope(path: string): CorsScope {
    return CONTROL_PATH.test(path) ? "control" : "open";
  }

  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string): Inference | undefined {
    try {
      return this.#route(req, res, path, requestId);
    } catch (err) {
      if (!(err instanceof ShoalError)) throw err;
      sendFailure(res, requestId, err, this.#dialectOf(path), err instanceof NotAllowed ? { allow: err.allow } : undefined);
      return undefined;
    }
  }

  // The errors of a path that names a model in MLServer's format (or one unknown to an MLServer
  // repository) are MLServer's; every other path's, Shoal's.
  #dialectOf(path: string): Dialect | undefined {
    const name = (MODEL_PATH.exec(path) ?? CONTROL_PATH.exec(path))?.[1];
    if (name === undefined) return undefined;
    let model: string;
    try {
      model = decodeURIComponent(name);
    } catch {
      return undefined;
    }
    return this.plane.dialectOf(model) === "mlserver" ? MLSERVER_INFER : undefined;
  }

  #route(req: HttpRequest, res: HttpResponse, path: string, requestId: string): Inference | undefined {
    const { plane } = this;
    const ok = (value: unknown) => sendJson(res, requestId, 200, value);
    if (path === "/v2" || path === "/v2/") {
      get(req, path);
      ok(plane.serverMetadata());
      return;
    }
    if (path === "/v2/health/live") {
      get(req, path);
      ok({ live: true });
      return;
    }
    if (path === "/v2/health/ready") {
      get(req, path);
      const reason = plane.notReady();
      if (reason !== undefined) throw new ShoalError("NOT_READY", reason);
      ok({ ready: true });
      return;
    }
    if (path === "/v2/models/stats") {
      get(req, path);
      ok({ model_stats: plane.statistics() });
      return;
    }
    if (path === "/v2/repository/index") {
      post(req, path);
      this.#control(req, res, requestId, (body) => ok(plane.index(body.ready === true)));
      return;
    }
    const repository = CONTROL_PATH.exec(path);
    if (repository !== null) {
      post(req, path);
      const refused = plane.mayControl(req.headers.origin, req.headers.authorization);
      if (refused !== undefined) {
        sendError(res, requestId, refused.error, refused.headers);
        return;
      }
      const [, name, action] = repository as unknown as [string, string, "load" | "unload"];
      const model = decodeSegment(name);
      this.#control(req, res, requestId, () => {
        plane.control(action, model).then(
          () => ok({}),
          (err: unknown) => (err instanceof ShoalError ? sendFailure(res, requestId, err, this.#dialectOf(path)) : this.door.guard.unexpected(err, res, requestId)),
        );
      });
      return;
    }
    const match = MODEL_PATH.exec(path);
    if (match === null) throw new ShoalError("NOT_FOUND", path);
    const [, rawName, rawVersion, action = ""] = match;
    const name = decodeSegment(rawName!);
    const version = rawVersion === undefined ? undefined : decodeSegment(rawVersion);
    if (INFERENCES.has(action)) return this.#infer(name, version, action);
    get(req, path);
    const target = plane.find(name, version);
    if (action === "ready") {
      const reason = plane.modelNotReady(target);
      if (reason !== undefined) throw new ShoalError("NOT_READY", reason);
      ok({ name, ready: true });
    } else if (action === "config") {
      ok(target instanceof RouteModel ? target.config() : { ...target.spec.settings, name });
    } else if (action === "stats") {
      ok({ model_stats: plane.statistics(target) });
    } else {
      ok(plane.metadataOf(target));
    }
  }

  #infer(name: string, version: string | undefined, action: string): Inference {
    const { plane } = this;
    // The model is looked up first, so that an unknown one is a 404 whatever the method.
    const target = plane.find(name, version);
    // The generate extension types a request's fields by the model's inputs, as far as it knows them yet.
    const inputs = () => (target instanceof RouteModel ? target.metadata().inputs : (target.metadata?.inputs ?? []));
    const streams = action === "infer_stream" || action === "generate_stream";
    const dialect = plane.dialectOfTarget(target) === "mlserver" ? (streams ? MLSERVER_STREAM : MLSERVER_INFER) : action === "infer" ? undefined : action === "infer_stream" ? INFER_STREAM : new GenerateDialect(inputs(), streams);
    return { path: plane.inferPath(target, action), steps: plane.stepsOf(target), dialect, v2: plane.identityOf(target) };
  }

  // Reads a small JSON control body (empty is `{}`) and hands it over.
  #control(req: HttpRequest, res: HttpResponse, requestId: string, then: (body: Record<string, unknown>) => void): void {
    if (this.door.admission.draining) throw shuttingDown();
    readBody(
      req,
      CONTROL_BODY_BYTES,
      ({ bytes }) =>
        this.door.guard.run(res, requestId, () => {
          let body: Record<string, unknown>;
          try {
            body = parseJsonObject(bytes, true);
          } catch (err) {
            if (!(err instanceof ShoalError)) throw err;
            sendError(res, requestId, err);
            return;
          }
          then(body);
        }),
      (close) => sendError(res, requestId, new ShoalError("BODY_TOO_LARGE", `the limit is ${CONTROL_BODY_BYTES} bytes`), close ? { connection: "close" } : undefined),
    );
  }
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
