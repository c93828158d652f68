import type { ShoalError } from "../errors.js";
import type { RequestTrace } from "../metrics/tracing.js";
import type { StreamPolicy } from "../stage-options.js";
import type { RequestMeta } from "../worker.js";
import type { ResponseCache } from "./response-cache.js";

/** What the worker holding a streamed task is told about its stream. */
export type StreamAction = "cancel" | "pause" | "resume";

/** A step of a task's way: a stage of its route, or the model version it is for. */
export interface Step {
  /**
   * Queues the task. A task at its first step may be refused (the error to answer with); one
   * coming from an earlier step was already accepted and is always queued.
   */
  admit(task: Task): ShoalError | undefined;
  /** The model version it is, for a model's step: names it in the access log. */
  readonly label?: string;
  /** Set at a route's first step (or a model's) whose settings give `responseCache`: the door looks its requests up there. */
  readonly cache?: ResponseCache;
  /** Set when its Worker streams: how a stream waits for a slow client. */
  readonly stream?: StreamPolicy;
  /** Set for a stage that gathers the sub-items of an earlier stage's fan-out. */
  readonly gathers?: boolean;
}

/** The queue that holds a task while it waits (or its sub-items, while they are out): told when the task settles there. */
export interface Queue {
  unqueue(task: Task): void;
}

/** How a task's answer reaches its client. The HTTP front implements it. */
export interface Reply {
  /** Answer 200 with these bytes, and these response headers if any. */
  send(body: Uint8Array, contentType: string, headers?: Record<string, string>): void;
  /** Answer with the error's status and `{"error": …}`; after a stream's first chunk, end the stream with an error event. */
  fail(error: ShoalError): void;
  /** Send a chunk of the answer's stream: the first one starts it. */
  chunk(body: Uint8Array): void;
  /** End the answer's stream after its last chunk. */
  end(): void;
  /** Called once when the task settles in any way (answered, failed or dropped), after its answer. */
  release(): void;
  /** Its request's span, when tracing is on and samples it. */
  readonly traced?: RequestTrace | undefined;
}

/**
 * One request's item travelling through its steps: the stages of its route, or its model. It settles exactly once:
 * `succeed`, `fail` or `drop` (client gone); later calls are ignored, so a late worker result
 * after a timeout cannot answer twice.
 */
export class Task {
  /** Index of the step it is at, in `steps`. */
  stepIndex = 0;
  /** When it entered its current step's queue (performance.now() clock). */
  enqueuedAt = 0;
  /** The queue that holds it, while it is queued. */
  queuedIn: Queue | null = null;
  settled = false;
  /** Input of the current step: the request body at the first, the previous step's output after. */
  payload: unknown;
  /** Buffers in `payload` to move, not copy, to the worker. */
  transfer: ArrayBuffer[] | undefined;
  /** The first stage's input is already a value, not request bytes (dry runs). */
  decoded = false;
  /** When set, each stage appends how long its forward call took (dry runs). */
  trace: { stage: string; ms: number }[] | undefined;
  /** Time spent in queues so far, every step's together, in ms. */
  queueMs = 0;
  /** The part of `queueMs` spent held back for its batch to fill while a worker was free, in ms. */
  fillMs = 0;
  /** Time its batches spent at workers so far (round trip included), every step's together, in ms. */
  forwardMs = 0;
  /** The size of the last batch it was sent in (0: never sent). */
  batchSize = 0;
  /** The worker that ran its last batch (an id within the stage, or within the shared pool). */
  workerId: number | undefined;
  /** Its client takes its last step's chunks as a stream, rather than gathered into one answer. */
  streamed = false;
  /** While a worker holds it at a step that streams: tells the worker what to do with its stream. */
  control: ((action: StreamAction) => void) | undefined;
  /** Its slot in the serving core's ledger while it is in flight (-1: none; serving/ledger.ts). */
  ledgerSlot = -1;
  /** The priority its request asked: 1 is the highest level, 0 the queue's default (docs/scheduling.md). */
  priority = 0;
  /** Its priority level in the queue that holds it (1 the highest), set by a queue with levels; 0: the queue has none. */
  level = 0;
  /** The time its queue predicted, on admitting it, from joining to its answer there, in ms (admission by predicted latency); cleared once compared. */
  predictedMs: number | undefined = undefined;
  /** The tenant its request came from ("" when the server has no tenant key): its share follows its weight (docs/scheduling.md). */
  tenant = "";
  /** Its cost in the queue that holds it (`sizeOf`), when that queue has a `maxBatchCost` or length buckets; else 0. */
  cost = 0;
  /** Its tenant's share in the queue that holds it, set by a queue that shares between tenants (bounded: fair-share.ts); undefined: the queue does not. */
  share: string | undefined = undefined;
  /** Its place in a queue order that keeps one (a priority order's), while it is queued there. */
  orderSlot: object | undefined = undefined;

  /** Its request's span, when tracing is on and samples it. */
  readonly traced: RequestTrace | undefined;
  readonly #reply: Reply;

  constructor(
    readonly steps: readonly Step[],
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
    this.traced = reply.traced;
  }

  /** True at its first step: the worker decodes the request body. */
  get ingress(): boolean {
    return this.stepIndex === 0;
  }

  /** True at its last step: the worker encodes the response body. */
  get egress(): boolean {
    return this.stepIndex === this.steps.length - 1;
  }

  /** Queues it at its step (the first, but for a sub-item); the error is why it was refused. */
  start(): ShoalError | undefined {
    return this.steps[this.stepIndex]!.admit(this);
  }

  /** Takes the output of its current step to the next one (or to step `to`, past its sub-items' steps), whose input it is. */
  advance(value: unknown, transfer: ArrayBuffer[] | undefined, to = this.stepIndex + 1): void {
    this.stepIndex = to;
    this.payload = value;
    this.transfer = transfer;
    this.steps[this.stepIndex]!.admit(this);
  }

  succeed(body: Uint8Array, contentType: string, headers?: Record<string, string>): void {
    if (!this.#settle()) return;
    try {
      this.#reply.send(body, contentType, headers);
    } finally {
      this.#reply.release();
    }
  }

  /** Fails it; a worker streaming it is told to stop. */
  fail(error: ShoalError): void {
    if (!this.#settle()) return;
    try {
      this.control?.("cancel");
      this.#reply.fail(error);
    } finally {
      this.#reply.release();
    }
  }

  /** The client is gone: settle without an answer, so queued work is skipped and a stream stops. */
  drop(): void {
    if (!this.#settle()) return;
    this.control?.("cancel");
    this.#reply.release();
  }

  /** A chunk of its stream. */
  chunk(body: Uint8Array): void {
    if (!this.settled) this.#reply.chunk(body);
  }

  /** Its worker ended its stream: after the last chunk, or with `error`. */
  end(error?: ShoalError): void {
    if (!this.#settle()) return;
    try {
      if (error === undefined) this.#reply.end();
      else this.#reply.fail(error);
    } finally {
      this.#reply.release();
    }
  }

  #settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.payload = undefined;
    this.transfer = undefined;
    this.queuedIn?.unqueue(this);
    this.queuedIn = null;
    return true;
  }
}
