import { ShoalError } from "../errors.js";
import { Task, type Reply, type Step } from "../scheduling/task.js";
import type { RequestMeta } from "../worker.js";
import { ByteBudget, type Hold } from "./byte-budget.js";
import { Ledger, type Slotted } from "./ledger.js";
import type { CachedAnswer } from "../scheduling/response-cache.js";

/**
 * How long a drain waits with no request arriving before it ends (clients still sending get
 * their 503 first), and how often it looks again for heads still arriving.
 */
const QUIET_MS = 100;

/** The 503 of a request that came while the server is shutting down (or gave up), at any door. */
export function shuttingDown(): ShoalError {
  return new ShoalError("SHUTTING_DOWN", "the server is shutting down");
}

/** A door's answer side of one request: the task's {@link Reply}, timed and tracked by the core. */
export interface Entrant extends Reply {
  /** The request's deadline timer, set by {@link Admission.enter}. */
  timer: NodeJS.Timeout | undefined;
  /** Its task, set by {@link Admission.enter} before the task is queued. */
  task: Task;
}

/** What a request whose bytes are still arriving is told when the server gives up: a door's own, one for all its uploads. */
export type Abandon<K> = (upload: K, error: ShoalError) => void;

/** A request whose bytes are still arriving (a body, a gRPC message), as the admission holds it. */
export interface Upload extends Slotted {
  readonly key: object;
  readonly abandon: Abandon<never>;
}

/**
 * The one place that admits a request, whatever door it came through (REST, gRPC, streams, the
 * OpenAI routes): the budget of request bytes, the ledger of requests in flight from their first
 * byte, the task each one becomes with its deadline timer, the drain and the giving up. It
 * imports no transport: a door turns its wire into these calls.
 */
export class Admission {
  readonly #budget: ByteBudget;
  #inFlight = 0;
  /** The tasks of requests admitted and not yet answered. */
  readonly #accepted = new Ledger<Task>();
  /** Requests whose bytes are still arriving, each with what tells it the server gave up. */
  readonly #uploads = new Ledger<Upload>();
  /** What the doors have begun to read and not yet handed over (node:http's heads still arriving). */
  readonly #arriving: (() => number)[] = [];
  /** Requests arriving from then on (performance.now()) are refused: the drain's start. */
  #closingAt = Infinity;
  /** Set when the server gave up: the answer of every request admitted from then on. */
  #abandoned: ShoalError | undefined;
  #drained: (() => void) | undefined;
  /** When the last request arrived (performance.now() clock). */
  #lastArrival = 0;

  constructor(
    /** Most request bytes held at once (`--max-inflight-bytes`). */
    maxInflightBytes: number,
  ) {
    this.#budget = new ByteBudget(maxInflightBytes);
  }

  /** Requests admitted and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Request bytes held now (`--max-inflight-bytes` is the most). */
  get bytesInFlight(): number {
    return this.#budget.held;
  }

  /** The server is shutting down (or gave up): requests arriving now are refused. */
  get draining(): boolean {
    return this.#closingAt < Infinity;
  }

  /** A door counts what it has begun to read but not yet handed over, for a drain to wait for. */
  watchArrivals(arriving: () => number): void {
    this.#arriving.push(arriving);
  }

  /** A request's first byte came at `arrival` (performance.now()); a drain ends only after a quiet spell. */
  arrived(arrival: number): void {
    this.#lastArrival = arrival;
  }

  /** Why a request whose first byte came at `arrival` is refused before it is read, or undefined. */
  refusal(arrival: number): ShoalError | undefined {
    return arrival >= this.#closingAt ? shuttingDown() : undefined;
  }

  /** An empty share of the budget of request bytes, for one request. */
  hold(): Hold {
    return this.#budget.hold();
  }

  /** A request's bytes begin to arrive (`key` stands for it): in flight for a drain until {@link uploaded}. */
  uploading<K extends object>(key: K, abandon: Abandon<K>): Upload {
    const upload: Upload = { key, abandon: abandon as Abandon<never>, ledgerSlot: -1 };
    this.#uploads.add(upload);
    return upload;
  }

  /** Its bytes are in, refused, or their sender gone: it is in flight now only if it entered. */
  uploaded(upload: Upload): void {
    if (upload.ledgerSlot < 0) return;
    this.#uploads.delete(upload);
    if (this.#uploads.size === 0 && this.#inFlight === 0) this.#drained?.();
  }

  /**
   * Makes the task of a request that is in, with its deadline timer (`timeoutMs` after
   * `arrival`), counts it in flight and queues it at its first step; one refused there (a full
   * queue, a server that gave up) is failed at once. `streamed`: its client takes a stream;
   * `priority`: the level it asked (0: its queue's default); `tenant`: the tenant it named (""
   * none; serving/request-schedule.ts).
   */
  enter(steps: readonly Step[], meta: RequestMeta, arrival: number, timeoutMs: number, payload: unknown, transfer: ArrayBuffer[] | undefined, reply: Entrant, streamed = false, priority = 0, tenant = ""): Task {
    const task = new Task(steps, meta, arrival + timeoutMs, payload, transfer, reply);
    task.streamed = streamed;
    task.priority = priority;
    task.tenant = tenant;
    reply.task = task;
    reply.timer = setTimeout(() => task.fail(new ShoalError("TIMEOUT", `no answer within ${Math.max(0, Math.round(timeoutMs))} ms`)), Math.max(0, arrival + timeoutMs - performance.now()));
    this.#accepted.add(task);
    this.#inFlight++;
    const refused = this.#abandoned ?? task.start();
    if (refused !== undefined) task.fail(refused);
    return task;
  }

  /**
   * Answers a request from a response cache: counted in flight as any other (a drain waits for
   * it), and answered at once with `answer`; it never reaches a queue.
   */
  answerFromCache(steps: readonly Step[], meta: RequestMeta, arrival: number, reply: Entrant, answer: CachedAnswer): void {
    const task = new Task(steps, meta, arrival, undefined, undefined, reply);
    reply.task = task;
    this.#accepted.add(task);
    this.#inFlight++;
    task.succeed(answer.body, answer.contentType, answer.headers as Record<string, string> | undefined);
  }

  /**
   * Cancels every admitted request whose id is `requestId` (an id a client chose may be shared):
   * each is answered 409 at once; one queued never reaches a worker, a stream stops between
   * chunks, and the answer of one in a running batch is dropped when it comes. How many it cancelled.
   */
  cancel(requestId: string): number {
    let cancelled = 0;
    for (const task of this.#accepted.list()) {
      if (task.meta.requestId !== requestId || task.settled) continue;
      task.fail(new ShoalError("CANCELLED", `request ${requestId} was cancelled`));
      cancelled++;
    }
    return cancelled;
  }

  /** The task of an admitted request has settled: its reply's `release` says so. */
  released(task: Task): void {
    this.#accepted.delete(task);
    if (--this.#inFlight === 0) this.#drained?.();
  }

  /**
   * Stops taking requests and resolves once every request that arrived before is answered, from
   * its first byte (its bytes still arriving included), and none has arrived for
   * {@link QUIET_MS}; or after `timeoutMs`, when those still open are answered 503.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#closingAt = Math.min(this.#closingAt, performance.now());
    return new Promise((resolve) => {
      let quiet: NodeJS.Timeout | undefined;
      const end = () => {
        this.#drained = undefined;
        clearTimeout(deadline);
        clearTimeout(quiet);
        resolve();
      };
      // What is unanswered then (a stream, a body still arriving) gets a 503 or an error event,
      // and a stream's generator is aborted, rather than holding its worker and the exit for up
      // to --stream-timeout.
      const deadline = setTimeout(() => {
        this.#drained = undefined;
        this.abandon(shuttingDown());
        end();
      }, timeoutMs);
      // Called again as each request settles; a head still arriving is looked for again shortly.
      const settle = () => {
        if (this.#inFlight > 0 || this.#uploads.size > 0) return;
        const arriving = this.#arriving.some((count) => count() > 0);
        const wait = arriving ? QUIET_MS : QUIET_MS - (performance.now() - this.#lastArrival);
        clearTimeout(quiet);
        if (wait > 0) quiet = setTimeout(settle, wait);
        else end();
      };
      this.#drained = settle;
      settle();
    });
  }

  /**
   * The server gives up (its workers cannot start, or a drain's time is up): every admitted
   * request is answered with `error` now, one whose bytes are still arriving too, and new
   * requests are refused as while draining.
   */
  abandon(error: ShoalError): void {
    this.#closingAt = Math.min(this.#closingAt, performance.now());
    this.#abandoned = error;
    for (const task of this.#accepted.list()) task.fail(error);
    for (const { key, abandon } of this.#uploads.list()) (abandon as Abandon<object>)(key, error);
  }
}
