import type { HttpRequest, HttpResponse } from "../../http/http-message.js";
import type { Delegate, Inference } from "../../http/intake.js";
import type { CorsScope } from "../../http/cors.js";
import { sendJson } from "../../http/send.js";
import type { V2DataPlane } from "../../serving/data-plane.js";
import { MLSERVER_INFER } from "./mlserver-dialect.js";

/**
 * The custom handlers of MLServer models (`@custom_handler(rest_path=..., rest_method=...)`),
 * each at its own path while its model is loaded, as MLServer adds them to its REST app: a
 * request there goes to the model's worker as a request of that model (queued and batched with
 * its inferences), which calls the handler with the JSON body and answers what it returns as
 * JSON. A path that a route or another API of the server has stays theirs.
 */
export class MLServerHandlers implements Delegate {
  readonly prefix = "";

  constructor(readonly plane: V2DataPlane) {}

  owns(path: string): boolean {
    return this.plane.customHandler(path) !== undefined;
  }

  corsScope(): CorsScope {
    return "open";
  }

  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string): Inference | undefined {
    const found = this.plane.customHandler(path);
    const handler = found?.handlers.find((h) => h.method === req.method);
    if (found === undefined || handler === undefined) {
      // FastAPI's answer to a method its route does not take.
      sendJson(res, requestId, 405, { detail: "Method Not Allowed" }, { allow: (found?.handlers ?? []).map((h) => h.method).join(", ") });
      return undefined;
    }
    const { target } = found;
    const identity = this.plane.identityOf(target);
    return { path, steps: this.plane.stepsOf(target), dialect: MLSERVER_INFER, v2: { ...identity, handler: handler.name } };
  }
}
