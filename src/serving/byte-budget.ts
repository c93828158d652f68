import { ShoalError } from "../errors.js";

/** The 429 of a request whose bytes do not fit in what is left of the budget. */
export function overBudget(): ShoalError {
  return new ShoalError("QUEUE_FULL", "the request bodies in flight leave no room for this one; retry later");
}

/**
 * One request's share of a {@link ByteBudget}. It grows as the body is read and is released
 * once, whichever way the request ends: later releases do nothing, so every path that ends a
 * request may release it without returning its bytes twice.
 */
export interface Hold {
  /** Bytes this request holds. */
  readonly bytes: number;
  /** Holds `bytes` more if they fit in what is left of the budget; otherwise takes nothing and says so. */
  take(bytes: number): boolean;
  /** Whether `bytes` more would fit in what is left of the budget now, holding nothing. */
  fits(bytes: number): boolean;
  /** Returns every byte held to the budget; only the first call does anything. */
  release(): void;
}

/**
 * The request body bytes the server holds at once (`--max-inflight-bytes`), shared by every
 * request: a body is held from the start of its reading until its task settles.
 */
export class ByteBudget {
  #held = 0;

  constructor(
    /** Most bytes held at once. */
    readonly limit: number,
  ) {}

  /** Bytes held now, by every request together. */
  get held(): number {
    return this.#held;
  }

  /** An empty hold for one request's body. */
  hold(): Hold {
    return new BudgetHold(this);
  }

  // Whether `more` bytes fit in what is left.
  room(more: number): boolean {
    return this.#held + more <= this.limit;
  }

  // The budget's side of a hold: `more` bytes if they fit, or nothing.
  reserve(more: number): boolean {
    if (!this.room(more)) return false;
    this.#held += more;
    return true;
  }

  // The budget's side of a release.
  free(bytes: number): void {
    this.#held -= bytes;
  }
}

// A class rather than closures: one small object for each request on the HTTP thread.
class BudgetHold implements Hold {
  bytes = 0;
  #released = false;

  constructor(readonly budget: ByteBudget) {}

  take(more: number): boolean {
    if (this.#released || !this.budget.reserve(more)) return false;
    this.bytes += more;
    return true;
  }

  fits(more: number): boolean {
    return !this.#released && this.budget.room(more);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.budget.free(this.bytes);
    this.bytes = 0;
  }
}
