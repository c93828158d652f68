/**
 * A small seeded random number generator (mulberry32) with the helpers the fuzz generators need.
 * The same seed gives the same numbers on every machine, so a run can be repeated exactly, and
 * each request draws from a generator of its own, seeded from the run's seed and its index, so
 * one request can be made again without the thousands before it.
 */

// Mixes the bits of a 32-bit value (the finalizer of MurmurHash3), so that nearby seeds and
// indexes start far apart.
function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A deterministic source of random values. */
export class Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** The generator of request `index` of a run seeded with `seed`. */
  static of(seed: number, index: number): Random {
    return new Random(mix32((seed >>> 0) ^ mix32(index + 0x9e3779b9)));
  }

  /** A whole number from 0 to 2^32 - 1. */
  uint32(): number {
    // mulberry32: one add, two multiplies, three shifts per value; period 2^32.
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A number in [0, 1). */
  next(): number {
    return this.uint32() / 4294967296;
  }

  /** A whole number from `min` to `max`, both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** A whole number from `min` to `max`, small ones far more likely (for sizes and depths). */
  skewed(min: number, max: number): number {
    const u = this.next();
    return min + Math.floor(u * u * u * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One of the values of `table`, each as likely as its weight. */
  weighted<T>(table: readonly (readonly [number, T])[]): T {
    let total = 0;
    for (const [weight] of table) total += weight;
    let u = this.next() * total;
    for (const [weight, value] of table) {
      u -= weight;
      if (u < 0) return value;
    }
    return table[table.length - 1]![1];
  }

  /** `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const v = this.uint32();
      out[i] = v & 0xff;
      if (i + 1 < n) out[i + 1] = (v >>> 8) & 0xff;
      if (i + 2 < n) out[i + 2] = (v >>> 16) & 0xff;
      if (i + 3 < n) out[i + 3] = v >>> 24;
    }
    return out;
  }

  /** A string of `n` characters drawn from `alphabet`. */
  string(n: number, alphabet: string): string {
    let out = "";
    for (let i = 0; i < n; i++) out += alphabet[Math.floor(this.next() * alphabet.length)];
    return out;
  }
}
