/**
 * When a worker that died before it was ready is started again, and when start-up gives up on
 * it. Pure decisions, so that they are tested without spawning anything.
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
