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
    let bytes = 0;
    let released = false;
    return {
      get bytes() {
        return bytes;
      },
      take: (more) => {
        if (released || this.#held + more > this.limit) return false;
        this.#held += more;
        bytes += more;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.#held -= bytes;
        bytes = 0;
      },
    };
  }
}
