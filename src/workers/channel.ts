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
  /** Stops the worker at once, even inside a synchronous `forward()`. */
  terminate(): void;
}

/** Starts a worker and returns its channel. `env` is the worker's extra environment. */
export type ChannelFactory = (boot: WorkerBoot, env: Record<string, string> | undefined, events: ChannelEvents) => Channel;
