/**
 * Fair sharing between tenants, inside a priority level: the pure decisions of start-time fair
 * queuing (each tenant's share has a virtual time, the work it was given divided by its weight;
 * the share with the least goes next), and the bound on how many tenants a queue keeps apart.
 * docs/scheduling.md states the rule.
 */

/** The default of `maxTenants`: tenants kept apart beyond those named in `tenantWeights`. */
export const MAX_TENANTS = 64;
/** The share (and metric label) of the tenants beyond `maxTenants`. */
export const OTHER_TENANT = "other";
/** The share (and metric label) of requests that name no tenant. */
export const NO_TENANT = "default";

/** What fair queuing keeps of one tenant's share of a level. */
export interface Fair {
  readonly weight: number;
  /** Work it was given, divided by its weight, on its level's virtual clock. */
  virtual: number;
}

/** The index of the share that goes next: the least virtual time, ties to the first (the one waiting longest). */
export function pickShare(active: readonly Fair[]): number {
  let best = 0;
  for (let i = 1; i < active.length; i++) if (active[i]!.virtual < active[best]!.virtual) best = i;
  return best;
}

/**
 * Charges the share taken for `cost` of work (an item: 1), and returns the level's virtual time
 * now: the start of the work just given.
 */
export function charge(share: Fair, cost: number): number {
  const start = share.virtual;
  share.virtual += cost / share.weight;
  return start;
}

/**
 * A share that had nothing waiting has work again: it starts at the level's virtual time, not
 * behind it. A tenant cannot bank its idle time and then take the server for as long.
 */
export function activate(share: Fair, levelVirtual: number): void {
  if (share.virtual < levelVirtual) share.virtual = levelVirtual;
}

/**
 * The tenants one queue keeps apart: those `tenantWeights` names, and the first `maxTenants`
 * others it meets; any more share {@link OTHER_TENANT}. Their number bounds the queue's memory
 * and its metric labels, whatever names clients send.
 */
export class TenantKeys {
  readonly #weights: Readonly<Record<string, number>>;
  readonly #seen = new Set<string>();
  readonly #most: number;

  constructor(weights: Readonly<Record<string, number>> = {}, maxTenants = MAX_TENANTS) {
    this.#weights = weights;
    this.#most = maxTenants;
  }

  /** The share of a request from `tenant` ("" when it names none). */
  key(tenant: string): string {
    if (tenant === "") return NO_TENANT;
    if (Object.hasOwn(this.#weights, tenant) || this.#seen.has(tenant)) return tenant;
    if (this.#seen.size >= this.#most) return OTHER_TENANT;
    this.#seen.add(tenant);
    return tenant;
  }

  /** The weight of a share (default 1). */
  weight(key: string): number {
    return Object.hasOwn(this.#weights, key) ? this.#weights[key]! : 1;
  }
}
