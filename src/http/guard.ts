import type { HttpResponse } from "./http-message.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import { sendError } from "./send.js";

/**
 * The HTTP door's answer to an exception of ours that escaped a handler or a reply: logged with
 * its stack, and the request answered 500 (or its answer cut off, once begun). A bug of ours
 * must cost one request, never the process.
 */
export class HandlerGuard {
  constructor(readonly log: Logger) {}

  /** Logs `err` and answers 500 on `res`, or cuts its answer off once its head is sent. */
  unexpected(err: unknown, res: HttpResponse, requestId: string): void {
    this.log.error({ requestId, err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, "request handler failed");
    if (!res.headersSent) sendError(res, requestId, new ShoalError("SERVER", "the request could not be handled"));
    else res.destroy();
  }

  /** Runs `fn` (a callback of a request's, outside the handler's own call) under {@link unexpected}. */
  run(res: HttpResponse, requestId: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.unexpected(err, res, requestId);
    }
  }
}
