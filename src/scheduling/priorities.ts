/**
 * The priority levels of a queue and their queue policies (Triton's, in milliseconds), and the
 * pure decisions over them: a request's level, which level a free worker takes from next, and
 * when a queued task's time at its level is up. docs/scheduling.md states each rule.
 */
import type { PrioritySettings } from "../stage-options.js";
import { TenantKeys } from "./fair-share.js";

/** What happens to a task still queued when its level's queue timeout passes. */
export type TimeoutAction = "reject" | "delay";

/** One level's queue policy. */
export interface QueuePolicy {
  /** Most tasks queued at this level on entering their route (429 past it); unset: only the queue's capacity. */
  readonly maxQueueSize: number | undefined;
  /** How long a task may wait in this queue at this level, in ms; unset: until its deadline. */
  readonly defaultTimeoutMs: number | undefined;
  /** `reject`: answered 408 when its queue timeout passes; `delay`: kept, and taken after every task of its level whose time is not up. */
  readonly timeoutAction: TimeoutAction;
}

/** The levels of a queue: level 1 is the highest, as Triton numbers them. */
export interface Priorities {
  /** How many levels (at least 1). */
  readonly levels: number;
  /** The level of a request that asks none (priority 0), 1..levels: the lowest unless the settings say otherwise. */
  readonly defaultLevel: number;
  /** The policy of each level, index 0 for level 1. */
  readonly policies: readonly QueuePolicy[];
  /** Most tasks of higher levels taken in a row while a lower level waits; then the lower level's turn comes. */
  readonly maxOvertakes: number;
  /** Set when the queue shares each level fairly between tenants (`tenantWeights` or `maxTenants` given). */
  readonly tenants: TenantKeys | undefined;
}

/** The default of `maxOvertakes`: a waiting level gets at least one place in 17. */
export const MAX_OVERTAKES = 16;

/** The levels the settings declare (checked: stage-options.ts), or undefined when they declare none: such a queue stays first in, first out, at no cost. */
export function prioritiesOf(settings: PrioritySettings): Priorities | undefined {
  const { priorityLevels, defaultPriority, maxOvertakes, queuePolicy, priorityQueuePolicy, tenantWeights, maxTenants } = settings;
  const fair = tenantWeights !== undefined || maxTenants !== undefined;
  if (priorityLevels === undefined && defaultPriority === undefined && queuePolicy === undefined && priorityQueuePolicy === undefined && !fair) return undefined;
  const levels = priorityLevels ?? 1;
  const own = priorityQueuePolicy ?? {};
  const policies = Array.from({ length: levels }, (_, i): QueuePolicy => {
    const policy = { ...queuePolicy, ...own[String(i + 1)] };
    return { maxQueueSize: policy.maxQueueSize, defaultTimeoutMs: policy.defaultTimeoutMs, timeoutAction: policy.timeoutAction ?? "reject" };
  });
  return { levels, defaultLevel: defaultPriority === undefined || defaultPriority === 0 ? levels : defaultPriority, policies, maxOvertakes: maxOvertakes ?? MAX_OVERTAKES, tenants: fair ? new TenantKeys(tenantWeights, maxTenants) : undefined };
}

/**
 * The level (1..levels) of a task that asked `priority` (0: the default level), or undefined
 * when it asked a level the queue does not have. `clamp`: a task that entered at an earlier
 * stage takes this queue's lowest level instead, for it was already accepted.
 */
export function levelOf(priority: number, priorities: Priorities, clamp: boolean): number | undefined {
  if (priority === 0) return priorities.defaultLevel;
  if (priority <= priorities.levels) return priority;
  return clamp ? priorities.levels : undefined;
}

/**
 * The level a free worker takes its next task from (index 0 for level 1), or -1 when all are
 * empty: the highest level with tasks waiting, unless a lower one has been overtaken
 * `maxOvertakes` times in a row; then the highest of those. So no level waits for ever: one
 * that has tasks is overtaken at most `maxOvertakes` times, and then waits at most for one
 * task of each starving level above it.
 *
 * @param waiting tasks waiting at each level
 * @param overtaken how many tasks of higher levels were taken since each level's last
 */
export function pickLevel(waiting: ArrayLike<number>, overtaken: ArrayLike<number>, maxOvertakes: number): number {
  let first = -1;
  for (let level = 0; level < waiting.length; level++) {
    if (waiting[level] === 0) continue;
    if (first < 0) first = level;
    else if (overtaken[level]! >= maxOvertakes) return level;
  }
  return first;
}

/** Counts a task taken from `taken` (an index of {@link pickLevel}): each lower level with tasks waiting was overtaken once more. */
export function countTake(taken: number, waiting: ArrayLike<number>, overtaken: number[]): void {
  overtaken[taken] = 0;
  for (let level = taken + 1; level < waiting.length; level++) if (waiting[level]! > 0) overtaken[level]!++;
}

/**
 * When a task's time in the queue is up at its level (the clock of `enqueuedAt`): the sooner
 * of its deadline and its level's queue timeout. Tasks of a level leave in this order,
 * earliest first.
 */
export function dueOf(deadline: number, enqueuedAt: number, policy: QueuePolicy): number {
  return policy.defaultTimeoutMs === undefined ? deadline : Math.min(deadline, enqueuedAt + policy.defaultTimeoutMs);
}
