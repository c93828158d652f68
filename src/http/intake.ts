import type { HttpRequest, HttpResponse } from "./http-message.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import type { Admission } from "../serving/admission.js";
import type { Step } from "../scheduling/task.js";
import type { V2Identity } from "../worker.js";
import type { Dialect } from "./dialect.js";
import type { CorsScoped } from "./cors.js";
import type { HandlerGuard } from "./guard.js";

/**
 * A POST a delegate found the target of, for the door to take in as it takes a route's: the
 * same body limits, deadline and answers, counted under `path`; `dialect` reads its body and
 * shapes its answers for an API of its own; `v2` says which V2 model it is for.
 */
export interface Inference {
  readonly path: string;
  readonly steps: readonly Step[];
  readonly dialect?: Dialect;
  readonly v2?: V2Identity;
}

/** A handler the front gives every request under its prefix (the V2 protocol under `/v2`), which says the CORS scope of its paths. */
export interface Delegate extends CorsScoped {
  /** Paths equal to it or under it (`/v2`, `/v2/...`) are its own. */
  readonly prefix: string;
  /** When set, the paths that are its own, in place of its prefix's (the custom handlers of MLServer models, anywhere). */
  owns?(path: string): boolean;
  /**
   * Answers a request of its own, or returns the inference it asks for, which the door then
   * takes in.
   */
  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string): Inference | undefined;
}

/** What the HTTP door lends a dialect's handler when it is made. */
export interface DelegateParts {
  /** Who may load and unload models, and which origins get CORS headers. */
  readonly access: AccessPolicy;
  /** The serving core's admission: whether the server is draining. */
  readonly admission: Admission;
  /** The answer to an exception of ours in a handler's callbacks. */
  readonly guard: HandlerGuard;
}
