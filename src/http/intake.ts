import type { HttpRequest, HttpResponse } from "./http-message.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import type { Step } from "../scheduling/task.js";
import type { V2Identity } from "../worker.js";
import type { Dialect } from "./dialect.js";
import type { CorsScoped } from "./cors.js";

/** A handler the front gives every request under its prefix (the V2 protocol under `/v2`), which says the CORS scope of its paths. */
export interface Delegate extends CorsScoped {
  /** Paths equal to it or under it (`/v2`, `/v2/...`) are its own. */
  readonly prefix: string;
  /** `arrival`: the request's first byte, on the performance.now() clock. */
  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string, arrival: number): void;
}

/** What the HTTP door lends a dialect's handler when it is made: the one way a request is accepted, and the guards around handlers. */
export interface Intake {
  /** Who may load and unload models, and which origins get CORS headers. */
  readonly access: AccessPolicy;
  readonly draining: boolean;
  /**
   * Takes a POST whose task goes through `steps`, answered and counted under `path`: the same
   * body limits, deadline and answers as a route's; `dialect` reads its body and shapes its
   * answers for an API of its own; `v2` says which V2 model it is for.
   */
  accept(path: string, steps: readonly Step[], req: HttpRequest, res: HttpResponse, requestId: string, arrival: number, dialect?: Dialect, v2?: V2Identity): void;
  /** Answers 500 for an exception that escaped a handler, and logs it. */
  unexpected(err: unknown, res: HttpResponse, requestId: string): void;
  /** Runs a callback of a request's under {@link Intake.unexpected}. */
  guard(res: HttpResponse, requestId: string, fn: () => void): void;
}
