import { Worker as Thread } from "node:worker_threads";
import type { ChannelFactory } from "./channel.js";

const ENTRY = new URL("./thread-main.js", import.meta.url);

/**
 * The young generation of a shared pool's worker thread, in MiB. Left to V8, it grows to 16 MiB
 * under load in every worker, while a model host's garbage per request is a few small objects
 * around tensors that live outside the heap: 4 MiB holds them (docs/benchmarks.md, "Memory per
 * model and per worker"). A stage's workers keep V8's default.
 */
const HOST_YOUNG_GENERATION_MB = 4;

/**
 * Runs a worker in a worker thread and talks to it over its MessagePort. The thread inherits
 * the process's `execArgv`, so a loader such as tsx applies there too, and sees the process's
 * arguments, so a server module that reads them registers the same stages in the worker.
 */
export const threadChannel: ChannelFactory = (boot, env, events) => {
  const thread = new Thread(ENTRY, {
    workerData: boot,
    ...(boot.host ? { resourceLimits: { maxYoungGenerationSizeMb: HOST_YOUNG_GENERATION_MB } } : {}),
    argv: process.argv.slice(2),
    env: env ? { ...process.env, ...env } : process.env,
  });
  let reason = "";
  thread.on("message", events.message);
  thread.on("error", (err) => {
    reason = `uncaught ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
  });
  thread.on("messageerror", (err) => {
    reason = `a message could not be read: ${err.message}`;
  });
  thread.on("exit", (code) => events.exit(reason || `exited with code ${code}`));
  return {
    send: (message, transfer) => thread.postMessage(message, transfer),
    stop: () => thread.postMessage({ kind: "stop" }),
    terminate: () => void thread.terminate(),
  };
};
