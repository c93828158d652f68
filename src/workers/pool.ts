import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { StageMetrics } from "../metrics/registry.js";
import type { ChannelFactory } from "./channel.js";
import type { BatchMessage, FlowMessage, FromWorker, LoadFailedMessage, LoadedMessage, MetricsMessage, ReadyMessage, ResultMessage, StreamMessage, ToWorker, WorkerBoot } from "./messages.js";
import { startVerdict, type RestartLimit } from "./restart-policy.js";
import { Slot, WorkerHandle } from "./worker-handle.js";

/** What a worker says that the pool does not handle itself: a model host's answers and its models' metrics. */
export type WorkerNews = LoadedMessage | LoadFailedMessage | (MetricsMessage & { model: string });

/** What a worker's life cycle means to the work around it. */
export interface WorkerEvents {
  /** Worker `workerId` has started (at start-up, or as a replacement) and takes work. */
  onWorkerUp?(workerId: number): void;
  /** Worker `workerId` is gone; a replacement with the same id follows unless the pool is closing. */
  onWorkerGone?(workerId: number): void;
  /** Worker `workerId` said something the pool leaves to its owner. */
  onNews?(workerId: number, message: WorkerNews): void;
}

/**
 * What a pool tells its owner. A batch is sent with a handle of the owner's own (`H`), which
 * comes back with its result: the pool knows workers, not what they work on.
 */
export interface PoolEvents<H> extends WorkerEvents {
  /** Worker `workerId` is free: pull more work. */
  onWorkerFree(workerId: number): void;
  /** A batch came back from the worker after `elapsedMs` (IPC included). */
  onBatchDone(handle: H, result: ResultMessage, contentType: string, elapsedMs: number): void;
  /** A batch will not come back (timeout or dead worker). */
  onBatchLost(handle: H, error: ShoalError): void;
  /** A chunk of one item's stream, or its end, from a batch the worker still holds. */
  onStream?(handle: H, message: StreamMessage): void;
}

export interface PoolOptions {
  /** Names the pool in logs and errors: a stage's name, or `models`. */
  name: string;
  num: number;
  /** What worker `workerId` is told when it is spawned. */
  boot(workerId: number): WorkerBoot;
  /** Cap on one `forward()` call, in ms. */
  timeoutMs: number;
  /** How many batches one worker may hold at once (default 1): more for a Worker that lets sequences join while it runs. */
  concurrency?: number;
  env: Record<string, string>[] | undefined;
  channel: ChannelFactory;
  logger: Logger;
  metrics: StageMetrics;
  /** The server's `--max-restarts`, which every restart counts against. */
  restarts: RestartLimit;
}

// A worker asked to stop that has not said `stopping` by then is busy in synchronous code: ending
// it by force is safe. One that has said it gets the forward timeout, at least STOP_MIN_MS, to
// finish what it runs.
const STOP_ANSWER_MS = 1000;
const STOP_MIN_MS = 5000;

/**
 * The `num` workers of a stage or of the shared pool: spawns them, hands a batch to a free one,
 * enforces the forward timeout, and replaces workers that die or overrun.
 */
export class Pool<H> {
  readonly #options: PoolOptions;
  readonly #owner: PoolEvents<H>;
  readonly #log: Logger;
  readonly #idle: WorkerHandle<H>[] = [];
  readonly #handles = new Map<number, WorkerHandle<H>>();
  readonly #slots = new Map<number, Slot>();
  /**
   * What the stage's workers declared when they became ready: content-type, warm-up example and
   * schemas. Undefined until the first worker is ready.
   */
  declared: ReadyMessage | undefined;
  #closing = false;
  /** Settles `start()`: set while some worker id has never been ready. */
  #startup: { resolve(): void; reject(err: Error): void } | undefined;

  constructor(options: PoolOptions, owner: PoolEvents<H>) {
    this.#options = options;
    this.#owner = owner;
    this.#log = options.logger.child({ stage: options.name });
  }

  /** Workers that have started and are alive. */
  get live(): number {
    let n = 0;
    for (const h of this.#handles.values()) if (h.live) n++;
    return n;
  }

  /** The worker ids waiting out a back-off before their next worker starts, with the ms left. */
  backingOff(): { workerId: number; inMs: number }[] {
    const now = performance.now();
    const waiting = [...this.#slots].filter(([, slot]) => slot.restart !== undefined && slot.restartAt > now);
    return waiting.map(([workerId, slot]) => ({ workerId, inMs: Math.ceil(slot.restartAt - now) }));
  }

  get hasIdle(): boolean {
    return this.#idle.length > 0;
  }

  /** Whether worker `workerId` takes a batch now. */
  isIdle(workerId: number): boolean {
    return this.#handles.get(workerId)?.free ?? false;
  }

  /** The ids of the workers started and alive. */
  liveWorkers(): number[] {
    const ids: number[] = [];
    for (const h of this.#handles.values()) if (h.live) ids.push(h.workerId);
    return ids;
  }

  /**
   * Spawns every worker; resolves when each has been ready once. Workers serve as soon as they
   * are ready. A worker that dies is started again after its slot's back-off (restart-policy.ts:
   * none for a kill from outside, nor the first time after it served); start-up fails (rejects
   * with a one-line reason) only when the user's code fails the same way twice in a row or a
   * worker used up its attempts.
   */
  start(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#startup = { resolve, reject };
      for (let id = 1; id <= this.#options.num; id++) {
        this.#slots.set(id, new Slot());
        this.#spawn(id);
      }
    });
  }

  /**
   * Sends a batch to a free worker (worker `workerId`, which must be free, when given) and
   * returns the id of the worker it went to; the owner hears back through `onBatchDone` or
   * `onBatchLost`, with `handle`.
   */
  dispatch(handle: H, message: Omit<BatchMessage, "seq">, transfer: ArrayBuffer[], workerId?: number): number {
    const at = workerId === undefined ? this.#leastBusy() : this.#idle.findIndex((h) => h.workerId === workerId);
    const worker = this.#idle[at]!;
    const seq = ++worker.seq;
    worker.flights.push({ seq, handle, sentAt: performance.now(), timer: setTimeout(() => this.#overrun(worker), this.#options.timeoutMs) });
    if (!worker.free) this.#idle.splice(at, 1);
    worker.channel.send({ ...message, seq }, transfer);
    return worker.workerId;
  }

  // The free worker to take a batch: the last to become free, or, where workers hold several
  // batches, the one that holds the fewest, so that sequences spread over the workers.
  #leastBusy(): number {
    let at = this.#idle.length - 1;
    // A worker that holds one batch at most holds none while it is free.
    if (this.#options.concurrency === undefined) return at;
    for (let i = at - 1; i >= 0; i--) if (this.#idle[i]!.flights.length < this.#idle[at]!.flights.length) at = i;
    return at;
  }

  /** Tells worker `workerId` what to do with the stream of item `index` of the batch `handle`, if it still holds it. */
  control(workerId: number, handle: H, index: number, action: FlowMessage["action"]): void {
    const worker = this.#handles.get(workerId);
    if (worker === undefined) return;
    for (const { seq, handle: held } of worker.flights) {
      if (held === handle) worker.channel.send({ kind: "flow", seq, index, action }, []);
    }
  }

  /** Sends a message other than a batch (a model load or unload) to a live worker. */
  send(workerId: number, message: ToWorker): void {
    const handle = this.#handles.get(workerId);
    if (handle?.live) handle.channel.send(message, []);
  }

  /** Stops every worker once what it runs is done; resolves when all have exited. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const slot of this.#slots.values()) clearTimeout(slot.restart);
    await Promise.all([...this.#handles.values()].map((handle) => this.#stop(handle)));
  }

  /**
   * Asks a worker to end after its work under way, and ends it by force if it does not answer or
   * takes too long. It is not ended outright: a thread ended inside a native call that is still
   * running (an ONNX Runtime session's run) takes the whole process down with it.
   */
  #stop(handle: WorkerHandle<H>): Promise<void> {
    if (handle.exited !== undefined) return handle.exited;
    handle.exited = new Promise((resolve) => (handle.onExit = resolve));
    if (handle.state === "gone") handle.onExit!();
    else {
      handle.channel.stop();
      handle.stopTimer = setTimeout(() => handle.channel.terminate(), STOP_ANSWER_MS);
    }
    return handle.exited;
  }

  #spawn(workerId: number): void {
    const o = this.#options;
    const handle = new WorkerHandle<H>(workerId, o.concurrency ?? 1);
    this.#handles.set(workerId, handle);
    handle.channel = o.channel(o.boot(workerId), o.env?.[workerId - 1], {
      message: (message) => this.#onMessage(handle, message),
      exit: (reason) => this.#onExit(handle, reason),
    });
  }

  #onMessage(handle: WorkerHandle<H>, message: FromWorker): void {
    if (message.kind === "stopping") {
      clearTimeout(handle.stopTimer);
      handle.stopTimer = setTimeout(() => handle.channel.terminate(), Math.max(this.#options.timeoutMs, STOP_MIN_MS));
      return;
    }
    // A replaced worker still finishing its last call: only its logs matter now.
    if (this.#handles.get(handle.workerId) !== handle && message.kind !== "log") return;
    switch (message.kind) {
      case "ready": {
        if (this.#closing) return;
        handle.state = "ready";
        handle.contentType = message.contentType;
        this.declared = message;
        const slot = this.#slots.get(handle.workerId)!;
        slot.attempts = 0;
        slot.fatal = undefined;
        slot.wasReady = true;
        slot.backoff.ready();
        this.#idle.push(handle);
        this.#log.debug({ worker: handle.workerId }, "worker ready");
        if (this.#startup !== undefined && [...this.#slots.values()].every((s) => s.wasReady)) {
          this.#startup.resolve();
          this.#startup = undefined;
        }
        this.#owner.onWorkerUp?.(handle.workerId);
        this.#owner.onWorkerFree(handle.workerId);
        return;
      }
      case "result": {
        const wasFree = handle.free;
        const flight = handle.take(message.seq);
        if (flight === undefined) return;
        clearTimeout(flight.timer);
        if (!wasFree) this.#idle.push(handle);
        handle.answered++;
        const elapsedMs = performance.now() - flight.sentAt;
        // The next batch first: the worker computes it while this one's answers are written.
        this.#owner.onWorkerFree(handle.workerId);
        this.#owner.onBatchDone(flight.handle, message, handle.contentType, elapsedMs);
        return;
      }
      case "stream": {
        const flight = handle.flight(message.seq);
        if (flight !== undefined) this.#owner.onStream?.(flight.handle, message);
        return;
      }
      case "loaded":
      case "loadFailed":
        this.#owner.onNews?.(handle.workerId, message);
        return;
      case "log":
        this.#log[message.level]({ ...message.fields, worker: handle.workerId }, message.msg);
        return;
      case "metrics":
        if (message.model !== undefined) this.#owner.onNews?.(handle.workerId, message as MetricsMessage & { model: string });
        else this.#options.metrics.workerReport(handle.workerId, message.metrics);
        return;
      case "fatal":
        handle.fatal = message.error;
        return;
    }
  }

  #overrun(handle: WorkerHandle<H>): void {
    if (this.#handles.get(handle.workerId) !== handle) return;
    const batches = handle.takeFlights();
    const ms = this.#options.timeoutMs;
    this.#log.warn({ worker: handle.workerId, timeoutMs: ms }, "forward() overran its timeout; replacing the worker");
    const error = new ShoalError("FORWARD_TIMEOUT", `forward() did not finish within ${ms} ms`);
    for (const batch of batches) this.#owner.onBatchLost(batch, error);
    const at = this.#idle.indexOf(handle);
    if (at >= 0) this.#idle.splice(at, 1);
    // The replacement starts now; the old worker is stopped beside it (see #stop).
    this.#handles.delete(handle.workerId);
    void this.#stop(handle);
    this.#options.metrics.workerReport(handle.workerId, undefined);
    this.#owner.onWorkerGone?.(handle.workerId);
    this.#restart(handle.workerId, 0);
  }

  #onExit(handle: WorkerHandle<H>, reason: string): void {
    const wasStarting = handle.state === "starting";
    handle.state = "gone";
    const batches = handle.takeFlights();
    clearTimeout(handle.stopTimer);
    handle.onExit?.();
    // A worker replaced after an overrun: its successor holds the id now.
    if (this.#handles.get(handle.workerId) !== handle) return;
    this.#handles.delete(handle.workerId);
    this.#options.metrics.workerReport(handle.workerId, undefined);
    const at = this.#idle.indexOf(handle);
    if (at >= 0) this.#idle.splice(at, 1);
    for (const batch of batches) this.#owner.onBatchLost(batch, new ShoalError("WORKER_DIED", "the worker running this request died"));
    if (this.#closing) return;
    const workerId = handle.workerId;
    const slot = this.#slots.get(workerId)!;
    const fatal = handle.fatal?.message;
    const delay = slot.backoff.died(reason, fatal !== undefined, handle.answered);
    if (!wasStarting) {
      this.#owner.onWorkerGone?.(workerId);
      this.#log.error({ worker: workerId, reason, restartInMs: delay }, "worker died; replacing it");
      this.#restart(workerId, delay);
      return;
    }
    // One that dies before it is ready is likely to die again: give up at start-up when the
    // user's code keeps failing.
    const failed = { attempt: ++slot.attempts, fatal, previousFatal: slot.fatal, exit: reason };
    slot.fatal = fatal;
    const verdict = this.#startup !== undefined && !slot.wasReady ? startVerdict(failed) : undefined;
    const fields = { worker: workerId, reason: fatal ?? reason, attempt: slot.attempts, ...(verdict === undefined ? { restartInMs: delay } : {}) };
    this.#log.error(handle.fatal?.stack === undefined ? fields : { ...fields, err: handle.fatal.stack }, "worker failed to start");
    if (verdict !== undefined) {
      this.#startup!.reject(new Error(`${this.#options.name} worker ${workerId} ${verdict}`));
      this.#startup = undefined;
      return;
    }
    this.#restart(workerId, delay);
  }

  #restart(workerId: number, delayMs: number): void {
    this.#options.metrics.restart();
    this.#options.restarts.record();
    const slot = this.#slots.get(workerId)!;
    slot.restartAt = performance.now() + delayMs;
    slot.restart = setTimeout(() => {
      slot.restart = undefined;
      if (!this.#closing) this.#spawn(workerId);
    }, delayMs);
  }
}
