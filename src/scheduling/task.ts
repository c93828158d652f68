import type { ShoalError } from "../errors.js";
import type { RequestMeta } from "../worker.js";
import type { BatchQueue } from "./batch-queue.js";
import type { Stage } from "./stage.js";

/** An HTTP route and the ordered stages of its pipeline. */
export interface Route {
  readonly path: string;
  readonly stages: readonly Stage[];
}

/** How a task's answer reaches its client. The HTTP front implements it. */
export interface Reply {
  /** Answer 200 with these bytes, and these response headers if any. */
  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void;
  /** Answer with the error's status and `{"error": …}`. */
  fail(error: ShoalError): void;
  /** Called once when the task settles in any way (answered, failed or dropped). */
  release(): void;
}

/**
 * One request's item travelling through the stages of its route. It settles exactly once:
 * `succeed`, `fail` or `drop` (client gone); later calls are ignored, so a late worker result
 * after a timeout cannot answer twice.
 */
export class Task {
  /** Index of the stage it is at, in `route.stages`. */
  stageIndex = 0;
  /** When it entered its current stage's queue (performance.now() clock). */
  enqueuedAt = 0;
  /** The queue that holds it, while it is queued. */
  queuedIn: BatchQueue | null = null;
  settled = false;
  /** Input of the current stage: the request body at the first stage, the previous output after. */
  payload: unknown;
  /** Buffers in `payload` to move, not copy, to the worker. */
  transfer: ArrayBuffer[] | undefined;
  /** The first stage's input is already a value, not request bytes (dry runs). */
  decoded = false;
  /** When set, each stage appends how long its forward call took (dry runs). */
  trace: { stage: string; ms: number }[] | undefined;

  readonly #reply: Reply;

  constructor(
    readonly route: Route,
    readonly meta: RequestMeta,
    /** The deadline on the performance.now() clock. */
    readonly deadline: number,
    payload: unknown,
    transfer: ArrayBuffer[] | undefined,
    reply: Reply,
  ) {
    this.payload = payload;
    this.transfer = transfer;
    this.#reply = reply;
  }

  /** True at the first stage of its route: the worker decodes the request body. */
  get ingress(): boolean {
    return this.stageIndex === 0;
  }

  /** True at the last stage of its route: the worker encodes the response body. */
  get egress(): boolean {
    return this.stageIndex === this.route.stages.length - 1;
  }

  succeed(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (this.#settle()) this.#reply.send(body, contentType, headers);
  }

  fail(error: ShoalError): void {
    if (this.#settle()) this.#reply.fail(error);
  }

  /** The client is gone: settle without an answer, so queued work is skipped. */
  drop(): void {
    this.#settle();
  }

  #settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.payload = undefined;
    this.transfer = undefined;
    this.queuedIn?.unqueue(this);
    this.queuedIn = null;
    this.#reply.release();
    return true;
  }
}
