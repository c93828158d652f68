import { createRequire } from "node:module";
import { pino, type Logger } from "pino";
import type { ServerConfig } from "./config.js";

export type { Logger };

/** How long identical error lines are counted instead of written, after the first. */
export const COLLAPSE_WINDOW_MS = 10_000;

const ERROR_LEVEL = 50;

/** Most windows open at once: lines of a key beyond them are written, not counted, so that many distinct lines cost no more than writing them. */
export const COLLAPSE_MAX_WINDOWS = 1000;

/**
 * The coordinator's logger. JSON lines by default; readable lines with `--log-format pretty`.
 * Pretty output is formatted synchronously on the main thread, which is fine for a terminal and
 * too slow for production traffic; JSON goes straight to stdout.
 *
 * Identical `error` lines are collapsed (see {@link Collapse}); `flush()` writes the counts
 * still pending, before the process exits.
 */
export function createLogger(config: Pick<ServerConfig, "logLevel" | "logFormat">): Logger {
  const collapse = new Collapse(COLLAPSE_WINDOW_MS);
  const options = { level: config.logLevel, base: { service: "shoal" }, hooks: { logMethod: collapsing(collapse) } };
  const logger =
    config.logFormat === "pretty"
      ? pino(options, loadPretty()({ colorize: Boolean(process.stdout.isTTY), ignore: "pid,hostname,service", sync: true }))
      : pino(options);
  const flush = logger.flush.bind(logger);
  logger.flush = (cb?: (err?: Error) => void) => {
    collapse.flush();
    flush(cb);
  };
  return logger;
}

// pino-pretty and its dependencies (about 1 MiB of heap) are loaded only for pretty output. It is
// CommonJS, so it loads synchronously.
function loadPretty(): typeof import("pino-pretty").build {
  return createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty").build;
}

/**
 * Counts lines by key: the first of a key is written and opens a window of `windowMs`; the same
 * key within the window is only counted, and when the window ends its count is handed to the
 * summary the first line left (once, if there was any repeat). A flood of one failure is then a
 * line per window, however many requests it fails.
 */
export class Collapse {
  readonly #windows = new Map<string, { ends: number; repeats: number; summarize: (repeats: number) => void }>();
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;

  constructor(
    readonly windowMs: number,
    /** The clock of the windows (`performance.now()`). */
    readonly now: () => number = () => performance.now(),
    readonly maxWindows = COLLAPSE_MAX_WINDOWS,
  ) {}

  /**
   * Whether a line of `key` is to be written now: true for the first of a window, false for a
   * repeat, which is counted. `summarize` writes the summary of the window this line opens.
   */
  take(key: string, summarize: (repeats: number) => void): boolean {
    const now = this.now();
    const open = this.#windows.get(key);
    if (open !== undefined && now < open.ends) {
      open.repeats++;
      this.#wake(open.ends, now);
      return false;
    }
    this.#end(now);
    if (this.#windows.size < this.maxWindows) this.#windows.set(key, { ends: now + this.windowMs, repeats: 0, summarize });
    return true;
  }

  /** Writes the summaries of every window now, ended or not, and forgets them. */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#end(Infinity);
  }

  // Ends the windows over by `now`: a summary for each that counted repeats. Windows are kept in
  // the order they opened, which is the order they end, so the first still open ends the search.
  #end(now: number): void {
    for (const [key, window] of this.#windows) {
      if (window.ends > now) break;
      this.#windows.delete(key);
      if (window.repeats > 0) window.summarize(window.repeats);
    }
  }

  // One timer, unref'd (it must not keep the process alive), for the earliest window with repeats.
  #wake(at: number, now: number): void {
    if (this.#timerAt <= at) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      const now = this.now();
      this.#end(now);
      const next = Math.min(...[...this.#windows.values()].filter((w) => w.repeats > 0).map((w) => w.ends));
      if (next !== Infinity) this.#wake(next, now);
    }, Math.max(0, at - now));
    this.#timer.unref();
  }
}

// The pino hook that passes `error` lines through a Collapse. A line's key is its message, the
// logger's bindings and its fields but the request id; the summary keeps those fields, with only
// the first line of a stack (`err`), and says how many more there were.
function collapsing(collapse: Collapse) {
  return function logMethod(this: Logger, args: unknown[], method: (...args: unknown[]) => void, level: number): void {
    if (level !== ERROR_LEVEL) return method.apply(this, args);
    const [fields, msg] = typeof args[0] === "object" && args[0] !== null ? [args[0] as Record<string, unknown>, args[1]] : [{}, args[0]];
    const { requestId: _, ...same } = fields;
    let key: string;
    try {
      key = JSON.stringify([msg, this.bindings(), same], (_k, v: unknown) => (v instanceof Error ? v.stack : v));
    } catch {
      return method.apply(this, args);
    }
    const summarize = (repeats: number) => {
      const stack = same.err instanceof Error ? same.err.stack : same.err;
      const err = typeof stack === "string" ? { err: stack.split("\n", 1)[0] } : {};
      method.call(this, { ...same, ...err, repeats }, `${String(msg)} … and ${repeats} more like it in the last ${collapse.windowMs / 1000} s`);
    };
    if (collapse.take(key, summarize)) method.apply(this, args);
  };
}
