/**
 * The shared pool's decisions, free of workers, timers and I/O: which workers load a model,
 * which free worker serves it, and which idle models leave to make room. Each takes what it
 * weighs as plain values, so it is tested with made-up pools and clocks.
 */

/** What a worker of the shared pool holds, for placement. */
export interface WorkerLoad {
  readonly workerId: number;
  /** Bytes of the models it holds or is loading. */
  readonly bytes: number;
  /** How many models it holds or is loading. */
  readonly models: number;
}

/**
 * The workers that load `want` more replicas of a model: of `candidates` (live workers that
 * neither hold nor are loading it), those holding the fewest bytes, then the fewest models.
 * Ties keep the candidates' order.
 */
export function placeReplicas(candidates: readonly WorkerLoad[], want: number): number[] {
  return [...candidates]
    .sort((a, b) => a.bytes - b.bytes || a.models - b.models)
    .slice(0, Math.max(0, want))
    .map((w) => w.workerId);
}

/**
 * Of the free workers that hold a model, the one whose other models have the fewest requests
 * waiting: taking it keeps the others free for the models only they can serve. Undefined when
 * none of the model's workers is free.
 *
 * @param holders the workers that hold the model, in the order they loaded it
 * @param othersWaiting requests queued for the other models a worker holds
 */
export function pickWorker(holders: Iterable<number>, isFree: (workerId: number) => boolean, othersWaiting: (workerId: number) => number): number | undefined {
  let best: number | undefined;
  let fewest = Infinity;
  for (const workerId of holders) {
    if (!isFree(workerId)) continue;
    const waiting = othersWaiting(workerId);
    if (waiting < fewest) [best, fewest] = [workerId, waiting];
  }
  return best;
}

/** A loaded model that could be evicted: idle, with nothing queued or running. */
export interface Evictable<M> {
  readonly model: M;
  /** Bytes it frees: its cost times the workers that hold it. */
  readonly bytes: number;
  /** When a request last used it (any clock, the same for all). */
  readonly lastUsed: number;
}

/** What making room decides: the models to evict, least recently used first, and whether the new one then fits. */
export interface Room<M> {
  readonly evict: M[];
  readonly fits: boolean;
}

/**
 * Makes room for `bytes` more in a budget of which `used` is taken: evicts the least recently
 * used idle models, one at a time, until the new one fits. When it cannot fit even with every
 * idle model gone, those are evicted all the same (they were idle; the model that needs the room
 * tries again when others become idle).
 */
export function makeRoom<M>(used: number, bytes: number, budget: number, idle: readonly Evictable<M>[]): Room<M> {
  if (used + bytes <= budget) return { evict: [], fits: true };
  const evict: M[] = [];
  for (const candidate of [...idle].sort((a, b) => a.lastUsed - b.lastUsed)) {
    used -= candidate.bytes;
    evict.push(candidate.model);
    if (used + bytes <= budget) return { evict, fits: true };
  }
  return { evict, fits: false };
}
