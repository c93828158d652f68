/**
 * Diagnostic preload: measures the main thread's Worker#postMessage calls (how many, how many
 * batch items each carries, wall time spent inside the call, structured-clone size) and prints a
 * line to stderr every 5 s. Load it before the server:
 *
 *   node --import ./bench/tools/postmessage-meter.mjs --import tsx bench/servers/shoal-exp.ts --port 8000 --address 127.0.0.1 --log-level warn
 *
 * The time is wall time: when the woken worker thread shares the caller's core, it includes the
 * time the caller waits to be scheduled again. Plain JavaScript so that it loads before tsx.
 */
import v8 from "node:v8";
import { isMainThread, Worker } from "node:worker_threads";

if (isMainThread) {
  const original = Worker.prototype.postMessage;
  let calls = 0;
  let items = 0;
  let ns = 0n;
  let sampledBytes = 0;
  let samples = 0;
  Worker.prototype.postMessage = function (message, transfer) {
    calls++;
    if (message !== null && typeof message === "object" && Array.isArray(message.items)) items += message.items.length;
    if (calls % 1000 === 0) {
      try {
        sampledBytes += v8.serialize(message).length;
        samples++;
      } catch {
        // not serialisable without its transfer list; skip the sample
      }
    }
    const t0 = process.hrtime.bigint();
    try {
      return original.call(this, message, transfer);
    } finally {
      ns += process.hrtime.bigint() - t0;
    }
  };
  setInterval(() => {
    if (calls === 0) return;
    const us = Number(ns) / 1000;
    process.stderr.write(
      `postMessage: ${calls} calls in 5 s, ${(items / calls).toFixed(2)} items/call, ${(us / calls).toFixed(1)} µs/call, ` +
        `${items > 0 ? (us / items).toFixed(2) : "n/a"} µs/item, ~${samples > 0 ? Math.round(sampledBytes / samples) : "?"} B/call\n`,
    );
    calls = items = sampledBytes = samples = 0;
    ns = 0n;
  }, 5000).unref();
}
