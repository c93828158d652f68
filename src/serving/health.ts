import type { PoolGauges } from "../metrics/registry.js";
import type { SharedPools } from "../models/shared-pools.js";
import type { Stage } from "../scheduling/stage.js";
import type { RestartLimit } from "../workers/restart-policy.js";

/** What the doors ask the server about its health. */
export interface Health {
  /** Why the server is not ready, or undefined when it is. */
  notReady(): string | undefined;
  /** What keeps a ready server below full strength (worker slots in back-off), or undefined. */
  degraded(): string | undefined;
  /** Why the server should be replaced (too many worker restarts), or undefined while it is healthy. */
  unhealthy(): string | undefined;
}

/** What health needs of a pool of workers. */
interface Workers {
  readonly live: number;
  backingOff(): { workerId: number; inMs: number }[];
}

/** A pool with its names: `label` in reasons, `gauge` in the metrics' `stage` label. */
interface NamedPool {
  label: string;
  gauge: string;
  workers: Workers;
}

/**
 * The server's health, from its stages, its shared pool, its restarts and whether it is shutting
 * down: what `/readyz`, `/healthz`, `/v2/health/ready` and gRPC's readiness and health checks
 * answer (computed here once for every door), and the back-off gauge.
 */
export class ServerHealth implements Health {
  readonly #stages: () => readonly Stage[];
  readonly #models: () => SharedPools | undefined;
  readonly #restarts: RestartLimit;
  readonly #draining: () => boolean;

  constructor(stages: () => readonly Stage[], models: () => SharedPools | undefined, restarts: RestartLimit, draining: () => boolean) {
    this.#stages = stages;
    this.#models = models;
    this.#restarts = restarts;
    this.#draining = draining;
  }

  notReady(): string | undefined {
    if (this.#draining()) return "shutting down";
    const down = this.#pools().filter((p) => p.workers.live === 0);
    if (down.length > 0) return `no live worker in ${down.map((p) => withBackoff(p)).join(", ")}`;
    return this.#models()?.notReady();
  }

  degraded(): string | undefined {
    const waiting = this.#pools().flatMap((p) => p.workers.backingOff().map(({ workerId, inMs }) => `${p.label} worker ${workerId} restarting in ${inMs} ms`));
    return waiting.length > 0 ? waiting.join(", ") : undefined;
  }

  unhealthy(): string | undefined {
    return this.#restarts.exceeded;
  }

  /** Each pool's slots in back-off, for the metrics. */
  gauges(): PoolGauges[] {
    return this.#pools().map((p) => ({ name: p.gauge, backingOff: p.workers.backingOff().length }));
  }

  #pools(): NamedPool[] {
    const pools: NamedPool[] = this.#stages().map((s) => ({ label: s.name, gauge: s.name, workers: s.pool }));
    return [...pools, ...(this.#models()?.parts() ?? [])];
  }
}

// "Stage_1", or "Stage_1 (worker 1 restarting in 800 ms)" while its slots back off.
function withBackoff({ label, workers }: NamedPool): string {
  const waiting = workers.backingOff().map(({ workerId, inMs }) => `worker ${workerId} restarting in ${inMs} ms`);
  return waiting.length > 0 ? `${label} (${waiting.join(", ")})` : label;
}
