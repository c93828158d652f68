/**
 * When to try a refused call again: a pure decision from the attempt, the answer's status and its
 * `Retry-After`, and the clock, so that it is tested without waiting.
 */

/** Retries of calls the server refused as too busy or unavailable. Off unless given. */
export interface RetryOptions {
  /** How many times a call is sent at most, the first included (so 1 is no retry). Default 3. */
  attempts?: number;
  /** The statuses retried. Default 429 and 503. */
  statuses?: readonly number[];
  /** The first wait when the server sends no `Retry-After`, doubled at each attempt (with jitter). Default 100. */
  baseDelayMs?: number;
  /** The longest wait; a `Retry-After` longer than this is not waited for (the error is thrown). Default 10000. */
  maxDelayMs?: number;
}

const DEFAULTS = { attempts: 3, statuses: [429, 503], baseDelayMs: 100, maxDelayMs: 10_000 } as const;

/** The retry policy with its defaults filled in; `false` or undefined means no retry. */
export function retryPolicy(options: RetryOptions | boolean | undefined): Required<RetryOptions> {
  if (options === undefined || options === false) return { ...DEFAULTS, attempts: 1 };
  return { ...DEFAULTS, ...(options === true ? {} : options) };
}

/** What {@link retryDelay} needs to know of the refused attempt. */
export interface Refusal {
  /** The attempt that was refused, 1 for the first. */
  attempt: number;
  /** Its status (HTTP, or the HTTP status a gRPC code stands for). */
  status: number;
  /** Its `Retry-After` header: seconds, or an HTTP date. */
  retryAfter?: string | null;
  /** Now, in ms since the epoch. */
  now: number;
  /** The call's deadline, in ms since the epoch, if it has one. */
  deadline?: number;
}

/**
 * How long to wait before the next attempt, in ms; undefined when the call is not to be tried
 * again: the status is not retried, the attempts are spent, `Retry-After` asks for longer than
 * `maxDelayMs`, or the wait would reach the deadline. Without `Retry-After` the wait is a random
 * share of `baseDelayMs × 2^(attempt-1)` (full jitter), so that refused clients do not come back
 * together.
 */
export function retryDelay(policy: Required<RetryOptions>, refusal: Refusal, random: () => number = Math.random): number | undefined {
  if (!policy.statuses.includes(refusal.status) || refusal.attempt >= policy.attempts) return undefined;
  const asked = retryAfterMs(refusal.retryAfter, refusal.now);
  if (asked !== undefined && asked > policy.maxDelayMs) return undefined;
  const delay = asked ?? Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (refusal.attempt - 1)) * random();
  if (refusal.deadline !== undefined && refusal.now + delay >= refusal.deadline) return undefined;
  return delay;
}

/** A `Retry-After` value in ms from `now`: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
