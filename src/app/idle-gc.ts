import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Logger } from "../logger.js";

/**
 * Gives memory back once a busy spell is over.
 *
 * A burst of requests grows the main thread's V8 heap: its young generation to V8's maximum
 * (32 MiB on Node 20, up to 128 MiB on Node 24), and its old generation with the requests'
 * objects that lived through two minor collections. V8 collects that garbage only when it next
 * needs room, and keeps the pages it grew into: a server that goes quiet after a burst would hold
 * them until the next one (docs/benchmarks.md, "Memory per model and per worker"). So when a
 * period in which the process was busy is followed by a whole period in which it was idle, one
 * full collection runs, of the kind that also shrinks the heap. It costs tens of milliseconds of
 * the event loop, at a moment when there is nothing to do.
 */
export class IdleGc {
  #busy = false;

  /** Whether to collect now, given the share of a core the process used over the last period. */
  next(cpuShare: number): boolean {
    if (cpuShare >= BUSY) {
      this.#busy = true;
      return false;
    }
    if (this.#busy && cpuShare < IDLE) {
      this.#busy = false;
      return true;
    }
    return false;
  }
}

// Busy: at least this share of a core over a period, worker threads included. Idle: under IDLE
// (a server with nothing to do uses a fraction of a percent: its timers).
const BUSY = 0.05;
const IDLE = 0.01;

/**
 * Watches the process every `periodMs` and collects after a busy spell (see {@link IdleGc}).
 * Returns how to stop; does nothing when `periodMs` is 0 or the runtime lends no collector.
 */
export function startIdleGc(periodMs: number, logger: Logger): () => void {
  const collect = periodMs > 0 ? collector() : undefined;
  if (collect === undefined) return () => {};
  const decide = new IdleGc();
  let last = process.cpuUsage();
  const timer = setInterval(() => {
    const now = process.cpuUsage();
    const usedUs = now.user - last.user + now.system - last.system;
    last = now;
    if (!decide.next(usedUs / (periodMs * 1000))) return;
    const before = process.memoryUsage().rss;
    const start = performance.now();
    collect();
    logger.debug({ ms: Math.round(performance.now() - start), rssBefore: before, rssAfter: process.memoryUsage().rss }, "idle: garbage collected");
    // The collection's own CPU time is not a busy spell.
    last = process.cpuUsage();
  }, periodMs);
  timer.unref();
  return () => clearInterval(timer);
}

type GcFunction = (options?: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;

// A full collection that shrinks the heap, from the runtime: Bun's own, or V8's `gc` (taken from
// a context made while --expose-gc is on, and the flag turned off again so that neither the
// user's code nor the workers started later see a global `gc` they did not ask for).
function collector(): (() => void) | undefined {
  const bun = (globalThis as { Bun?: { gc(force: boolean): void } }).Bun;
  if (bun !== undefined) return () => bun.gc(true);
  let gc = (globalThis as { gc?: GcFunction }).gc;
  if (typeof gc !== "function") {
    try {
      setFlagsFromString("--expose-gc");
      gc = runInNewContext("gc") as GcFunction | undefined;
    } catch {
      gc = undefined;
    } finally {
      setFlagsFromString("--no-expose-gc");
    }
  }
  if (typeof gc !== "function") return undefined;
  const run = gc;
  // Node 24's V8 gives the young generation's pages back only in a "last resort" collection;
  // older ones shrink the old generation with a plain one and take no such option.
  return Number(process.versions.node.split(".")[0]) >= 24 ? () => run({ type: "major", execution: "sync", flavor: "last-resort" }) : () => run();
}
