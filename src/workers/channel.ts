import type { FromWorker, ToWorker, WorkerBoot } from "./messages.js";

/** What a channel reports about its worker. */
export interface ChannelEvents {
  message(message: FromWorker): void;
  /** The worker is gone; `reason` says how (exit code, uncaught error, termination). */
  exit(reason: string): void;
}

/**
 * How the coordinator talks to one worker. The pool and the scheduler only see this, so thread
 * and process workers differ only in the factory that builds their channel.
 */
export interface Channel {
  send(message: ToWorker, transfer: ArrayBuffer[]): void;
  /** Asks the worker to end once its work under way is done (it answers `stopping`, then exits). */
  stop(): void;
  /**
   * Stops the worker at once, even inside a synchronous `forward()`. Not safe for a thread inside
   * a native call that is still running: the pool asks with `stop()` first.
   */
  terminate(): void;
}

/** Starts a worker and returns its channel. `env` is the worker's extra environment. */
export type ChannelFactory = (boot: WorkerBoot, env: Record<string, string> | undefined, events: ChannelEvents) => Channel;
