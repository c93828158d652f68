/**
 * When a worker that died is started again, when start-up gives up on it, and when restarts are
 * too many for the server to call itself healthy. Pure decisions, with the clock passed in, so
 * that they are tested without spawning anything.
 */

/** Failed attempts in a row after which a worker that was never ready ends start-up. */
export const MAX_START_ATTEMPTS = 5;

const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 10_000;

/**
 * How long to wait before starting a worker again after `failures` attempts in a row died
 * before they were ready: 100 ms, doubling, at most 10 s. A worker likely to die again should
 * not spin.
 */
export function restartDelayMs(failures: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.max(0, failures - 1));
}

/** How one start attempt of a worker that was never ready ended. */
export interface FailedStart {
  /** Its number in a row of failed attempts, from 1. */
  attempt: number;
  /** The error the user's code threw (module import, constructor, `init()`, warm-up), if it reported one. */
  fatal: string | undefined;
  /** The error the attempt before it reported, if it did. */
  previousFatal: string | undefined;
  /** How the worker ended: its exit code or signal. */
  exit: string;
}

/**
 * Why start-up ends after a failed attempt, or undefined to try again. It ends when the user's
 * code fails the same way twice in a row, or after {@link MAX_START_ATTEMPTS} attempts. A worker
 * that died without a fatal error (killed by a signal, by the OOM killer) is not the code
 * failing: it only uses up an attempt.
 */
export function startVerdict(failed: FailedStart): string | undefined {
  const { attempt, fatal, previousFatal, exit } = failed;
  // The reason ends a one-line message; a stack or a long user message stays in the log.
  const why = (fatal || exit).split("\n", 1)[0];
  if (fatal !== undefined && fatal === previousFatal) return `could not start: ${why}`;
  if (attempt >= MAX_START_ATTEMPTS) return `could not start in ${attempt} attempts: ${why}`;
  return undefined;
}

/**
 * A worker ready this long, or that answered this many batches, has shown that the user's code
 * works: when it dies, its slot's back-off starts over. The time lets an idle stage's workers
 * recover too; the batches, a busy one's that die now and then.
 */
export const STABLE_AFTER_MS = 30_000;
export const STABLE_AFTER_BATCHES = 10;

const SIGNAL_EXIT = "killed by signal ";

/** How a channel words the exit of a worker that a signal ended. */
export function signalExit(signal: string): string {
  return `${SIGNAL_EXIT}${signal}`;
}

/**
 * The back-off of one worker slot (a worker id of a stage or of the shared pool) across the
 * workers that hold it in turn. Each slot has its own, so that one slot crash-looping does not
 * hold back the others' replacements.
 */
export class SlotBackoff {
  /**
   * Deaths in a row that count against the user's code: not those a signal from outside ended,
   * and only since a worker of this slot last served a while ({@link STABLE_AFTER_MS},
   * {@link STABLE_AFTER_BATCHES}).
   */
  failures = 0;
  #readyAt: number | undefined;

  constructor(readonly now: () => number = () => performance.now()) {}

  /** The slot's worker is ready. */
  ready(): void {
    this.#readyAt = this.now();
  }

  /**
   * The slot's worker ended (`exit`: its exit code, signal or uncaught error; `fatal`: whether
   * the user's code reported a fatal error; `answered`: the batches it answered, which its
   * handle counts); the delay, in ms, before its replacement starts.
   * A worker a signal ended without a fatal error (a kill from outside, the OOM killer) is
   * replaced at once and does not count. One that served is replaced at once the first time: a
   * one-off crash should not cost capacity; a crash loop backs off as a failing start does.
   */
  died(exit: string, fatal: boolean, answered = 0): number {
    const readyAt = this.#readyAt;
    this.#readyAt = undefined;
    if (readyAt !== undefined && (this.now() - readyAt >= STABLE_AFTER_MS || answered >= STABLE_AFTER_BATCHES)) this.failures = 0;
    if (!fatal && exit.startsWith(SIGNAL_EXIT)) return 0;
    this.failures++;
    return readyAt !== undefined && this.failures === 1 ? 0 : restartDelayMs(this.failures);
  }
}

/**
 * `--max-restarts` within `--restart-window`: the server holds every worker restart against it
 * and, once more than `max` fell within one window, reports itself unhealthy for good, so that
 * its orchestrator replaces it rather than letting it loop on a broken model.
 */
export class RestartLimit {
  /** The times of the last `max + 1` restarts, oldest first. */
  readonly #times: number[] = [];
  #exceeded: string | undefined;

  /** `max` 0 turns the limit off. */
  constructor(
    readonly max: number,
    readonly windowMs: number,
    readonly now: () => number = () => performance.now(),
  ) {}

  /** A worker was restarted. */
  record(): void {
    if (this.max === 0 || this.#exceeded !== undefined) return;
    const now = this.now();
    this.#times.push(now);
    if (this.#times.length <= this.max) return;
    if (this.#times.length > this.max + 1) this.#times.shift();
    if (now - this.#times[0]! <= this.windowMs) {
      this.#exceeded = `${this.max + 1} worker restarts within ${this.windowMs} ms (--max-restarts ${this.max})`;
    }
  }

  /** Why the server is unhealthy, or undefined while it is not. */
  get exceeded(): string | undefined {
    return this.#exceeded;
  }
}
