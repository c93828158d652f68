/**
 * The {@link RequestWatch} of Bun.serve: the requests still unanswered after a while, whose
 * connections Bun would otherwise close for their silence.
 */
import type { FetchRequest, RequestWatch } from "../fetch/fetch-request.js";

/** What the watch uses of a Bun.serve server. */
export interface BunTimeouts {
  /** Seconds a request's connection may stay silent before Bun closes it (0: no limit). */
  timeout(request: Request, seconds: number): void;
}

// How long a request may go unanswered before its connection is watched (see Watch).
const WATCH_MS = 20;

/**
 * The requests not yet answered, each watched once it has waited {@link WATCH_MS}: whether its
 * client leaves (the request's abort signal), and a silence of up to its deadline on its
 * connection (Bun closes one silent for its idle timeout, even with a request under way), until
 * its answer goes out. Most requests are answered sooner and never pay for either; a client that
 * left meanwhile is found gone at once, as its signal is then already aborted.
 */
export class Watch implements RequestWatch {
  // In order of arrival.
  readonly #waiting = new Set<FetchRequest>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly server: BunTimeouts,
    /** Seconds a connection may be silent while its request is under way. */
    readonly busyS: number,
    /** Seconds an idle connection stays open: the server's idle timeout. */
    readonly idleS: number,
  ) {}

  add(req: FetchRequest): void {
    this.#waiting.add(req);
    this.#timer ??= setInterval(() => this.#sweep(), WATCH_MS);
  }

  /** The request is answered, or its client gone. */
  delete(req: FetchRequest): void {
    this.#waiting.delete(req);
  }

  extend(request: Request): void {
    this.server.timeout(request, this.busyS);
  }

  restore(request: Request): void {
    this.server.timeout(request, this.idleS);
  }

  #sweep(): void {
    const now = performance.now();
    for (const req of this.#waiting) {
      if (now - req.arrival < WATCH_MS) break;
      this.#waiting.delete(req);
      req.watch(this);
    }
    if (this.#waiting.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
