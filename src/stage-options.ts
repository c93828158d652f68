import { z } from "zod";

/** Paths a route may not take: the server answers them itself. */
export const RESERVED_PATHS = ["/", "/metrics", "/healthz", "/readyz", "/openapi.json", "/docs"] as const;

const routePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, "a route is a path that starts with '/'")
  .refine((p) => !(RESERVED_PATHS as readonly string[]).includes(p) && !p.startsWith("/docs/") && p !== "/v2" && !p.startsWith("/v2/"), {
    message: `reserved; ${RESERVED_PATHS.join(", ")}, /docs/… and /v2/… are the server's own`,
  });

/** The most sub-items one item may fan out to, unless the stage's `fanOut.max` says otherwise. */
export const DEFAULT_FAN_OUT = 64;

const queuePolicySchema = z.strictObject({
  maxQueueSize: z.number().int().min(1).optional(),
  defaultTimeoutMs: z.number().positive().optional(),
  // Triton writes its actions in capitals.
  timeoutAction: z
    .enum(["reject", "delay", "REJECT", "DELAY"])
    .transform((action) => action.toLowerCase() as "reject" | "delay")
    .optional(),
});

/** The fields of priority levels and queue policies, the same in stage options and in `model-settings.json` (docs/scheduling.md). */
export const prioritySettingsShape = {
  priorityLevels: z.number().int().min(1).max(1000).optional(),
  defaultPriority: z.number().int().min(0).optional(),
  maxOvertakes: z.number().int().min(1).optional(),
  queuePolicy: queuePolicySchema.optional(),
  priorityQueuePolicy: z.record(z.string(), queuePolicySchema).optional(),
  preferredBatchSize: z.array(z.number().int().min(1)).min(1).transform((sizes) => [...new Set(sizes)].sort((a, b) => a - b)).optional(),
  predictAdmission: z.boolean().optional(),
  tenantWeights: z.record(z.string().min(1).max(64), z.number().positive().max(1e6)).optional(),
  maxTenants: z.number().int().min(1).max(1000).optional(),
  maxBatchCost: z.number().positive().optional(),
  batchBuckets: z.array(z.number().positive()).min(1).transform((bounds) => [...new Set(bounds)].sort((a, b) => a - b)).optional(),
  responseCache: z.strictObject({ maxBytes: z.number().int().min(1) }).optional(),
};

/** `maxWaitMs`: a time in ms, or `"auto"` (chosen from the latency model; docs/scheduling.md). */
export const maxWaitSchema = z.union([z.number().min(0), z.literal("auto")]);

/** Checks what the fields of {@link prioritySettingsShape} must agree on: the levels a default and a policy name exist. */
export function checkPrioritySettings(settings: PrioritySettings, ctx: z.RefinementCtx): void {
  const levels = settings.priorityLevels ?? 1;
  if ((settings.defaultPriority ?? 0) > levels) ctx.addIssue({ code: "custom", path: ["defaultPriority"], message: `${settings.defaultPriority} is not a level of 1..${levels}` });
  for (const key of Object.keys(settings.priorityQueuePolicy ?? {})) {
    const level = Number(key);
    if (!/^[0-9]+$/.test(key) || level < 1 || level > levels) ctx.addIssue({ code: "custom", path: ["priorityQueuePolicy", key], message: `not a level of 1..${levels}` });
  }
}

/** A priority level's queue policy, as Triton's (its times in ms). */
export interface QueuePolicySettings {
  /** Most requests queued at the level; one more is refused with 429 (default: only the queue's capacity). */
  maxQueueSize?: number;
  /** How long a request may wait in the queue at this level, in ms (default: until its deadline). */
  defaultTimeoutMs?: number;
  /** When the queue timeout passes: `"reject"` answers 408 (default); `"delay"` keeps it, behind every request of its level whose time is not up. */
  timeoutAction?: "reject" | "delay";
}

/**
 * Priority levels and queue policies of a stage or a model (docs/scheduling.md). Without any of
 * them its queue is first in, first out, as it always was.
 */
export interface PrioritySettings {
  /** How many levels; 1 is the highest. A request asks one with V2 `parameters.priority` (gRPC) or the `x-shoal-priority` header. */
  priorityLevels?: number;
  /** The level of a request that asks none, or asks 0 (default: the lowest). */
  defaultPriority?: number;
  /** Most requests of higher levels taken in a row while a lower level waits (default 16): no level starves. */
  maxOvertakes?: number;
  /** Every level's queue policy, unless `priorityQueuePolicy` gives the level its own. */
  queuePolicy?: QueuePolicySettings;
  /** A level's own policy, by level: `{ "2": { "maxQueueSize": 100 } }`. */
  priorityQueuePolicy?: Record<string, QueuePolicySettings>;
  /** Batch sizes that leave at once when that many are queued, as Triton's `preferred_batch_size` (default: only `maxBatchSize`). */
  preferredBatchSize?: number[];
  /** Refuse at once, with 429 and `Retry-After`, a request the latency model says would miss its deadline (default false). */
  predictAdmission?: boolean;
  /** Each tenant's weight (default 1): when saturated, each tenant's share of the queue's batches follows it, within each priority level. */
  tenantWeights?: Record<string, number>;
  /** Most tenants the queue keeps apart beyond those of `tenantWeights` (default 64); the others share one "other" share and label. */
  maxTenants?: number;
  /** Most cost one batch may hold, its items' costs together (`sizeOf`; by default a request body's bytes): many short inputs or a few long ones. One item always goes, whatever its cost. */
  maxBatchCost?: number;
  /** Bounds of cost (`sizeOf`) that group items into buckets: `[16, 64, 256]` makes ≤ 16, ≤ 64, ≤ 256 and the rest. A batch then holds items of its first item's bucket only, so a model that pads to the longest item pads little. */
  batchBuckets?: number[];
  /** Keep answers and give them again for the same request, never queued (off by default): at most `maxBytes`, least recently used out first. On a route's first stage: the route's. */
  responseCache?: { maxBytes: number };
}

const stageOptionsSchema = z.strictObject({
  num: z.number().int().min(1).default(1),
  maxBatchSize: z.number().int().min(1).default(1),
  maxWaitMs: maxWaitSchema.default(10),
  timeoutMs: z.number().positive().optional(),
  route: z.union([routePath, z.array(routePath).min(1)]).default("/inference"),
  env: z.array(z.record(z.string(), z.string())).optional(),
  isolation: z.enum(["thread", "process"]).default("thread"),
  maxActive: z.number().int().min(1).optional(),
  continuous: z.boolean().optional(),
  fanOut: z.strictObject({ max: z.number().int().min(1).default(DEFAULT_FAN_OUT) }).optional(),
  gather: z.boolean().default(false),
  sizeOf: z.custom<(item: unknown) => number>((value) => typeof value === "function", "a function of an item to its cost").optional(),
  ...prioritySettingsShape,
}).superRefine(checkPrioritySettings);

const streamSettingsSchema = z.union([
  z.boolean(),
  z.strictObject({ bufferBytes: z.number().int().min(1).optional(), whenFull: z.enum(["pause", "fail"]).optional(), transport: z.enum(["sse", "ndjson"]).optional() }),
]);

/** Options of one stage, as given to `appendWorker()`. */
export interface StageOptions extends PrioritySettings {
  /** Workers in parallel (default 1). */
  num?: number;
  /** Largest batch `forward()` receives (default 1: no batching). */
  maxBatchSize?: number;
  /** How long a batch may wait to fill after its oldest item arrived, in ms (default 10); `"auto"`: chosen from the stage's latency model. */
  maxWaitMs?: number | "auto";
  /** Cap on one `forward()` call in ms; an overrun fails the batch with 408 and replaces the worker (default: `--timeout`). */
  timeoutMs?: number;
  /** The route (or routes) whose pipeline this stage joins (default `/inference`). */
  route?: string | string[];
  /**
   * Extra environment for each worker, one entry per worker (`env.length` must equal `num`). A
   * thread sees it in `process.env` only; native code (a CUDA runtime reading
   * `CUDA_VISIBLE_DEVICES`, say) sees it only with `isolation: "process"`.
   */
  env?: Record<string, string>[];
  /**
   * Where the workers run (default `"thread"`: worker threads of the server's process).
   * `"process"` runs each in a child process of its own, for native code that may crash (a
   * crash takes down that worker only, and the pool replaces it), real per-worker environment
   * variables, and memory of its own. Process workers take longer to start, and values between
   * stages are copied through a Unix socket in the frames of `docs/protocol.md` instead of
   * moving between threads.
   *
   * @example
   * ```ts
   * server.appendWorker(Model, {
   *   num: 2,
   *   isolation: "process",
   *   env: [{ CUDA_VISIBLE_DEVICES: "0" }, { CUDA_VISIBLE_DEVICES: "1" }],
   * });
   * ```
   */
  isolation?: Isolation;
  /**
   * For a {@link StepWorker}: the most sequences one worker generates at once (default 8). New
   * requests join between steps and finished ones leave at once (continuous batching).
   */
  maxActive?: number;
  /**
   * For a {@link StepWorker}: `false` lets sequences join only as one batch (of up to
   * `maxBatchSize`) when the worker has none active, as request-level batching does (default
   * `true`). Meant for comparing the two.
   */
  continuous?: boolean;
  /**
   * This stage's `forward()` may return {@link fanOut}`(values)` for an item: the item becomes one
   * sub-item per value, which the next stages take as items of their own, until a stage that
   * declares `gather`, or the route's end. `max` is the most sub-items of one item (default 64):
   * more fail the request with 422. See docs/pipelines.md.
   */
  fanOut?: { max?: number };
  /**
   * This stage takes, for each item that an earlier stage of the route fanned out, the array of
   * its sub-items' outputs, in order (one item per request, batched as usual).
   */
  gather?: boolean;
  /**
   * The cost of one queued item, for `maxBatchCost`: at the route's first stage the request's
   * body (a `Uint8Array`, undecoded), at a later one the previous stage's output. Runs on the
   * server's thread for every item: keep it cheap (default: a body's bytes, else 1).
   *
   * @example
   * ```ts
   * server.appendWorker(Embed, { maxBatchSize: 64, maxBatchCost: 16_384, sizeOf: (body) => (body as Uint8Array).byteLength });
   * ```
   */
  sizeOf?: (item: unknown) => number;
}

/** How a stage's Worker streams: the server's side of its {@link StreamSettings}. */
export interface StreamPolicy {
  bufferBytes: number;
  whenFull: "pause" | "fail";
  transport: "sse" | "ndjson";
}

/** Where a stage's workers run: threads of the server's process, or child processes. */
export type Isolation = "thread" | "process";

/** Stage options after validation, with defaults filled in. */
export interface ResolvedStageOptions {
  num: number;
  maxBatchSize: number;
  maxWaitMs: number | "auto";
  timeoutMs: number | undefined;
  routes: string[];
  env: Record<string, string>[] | undefined;
  isolation: Isolation;
  /** Set when the Worker streams. */
  stream: StreamPolicy | undefined;
  /**
   * Set for a {@link StepWorker} that joins sequences between steps: the most one worker holds.
   * Each sequence then goes to the worker alone.
   */
  maxActive: number | undefined;
  /** Set when the stage fans out: the most sub-items of one item. */
  fanOut: { max: number } | undefined;
  /** The stage gathers the sub-items of an earlier stage's fan-out. */
  gather: boolean;
  /** Its priority levels and queue policies, as given. */
  priority: PrioritySettings;
  /** The cost of an item, for `maxBatchCost`. */
  sizeOf: ((item: unknown) => number) | undefined;
}

/** A stream holds this many bytes for a slow client unless its Worker says otherwise. */
export const STREAM_BUFFER_BYTES = 1024 * 1024;
const MAX_ACTIVE = 8;

/** The server's side of a Worker class's `streaming` declaration; undefined when it does not stream. Throws a `TypeError` naming the stage when it is invalid. */
export function streamPolicy(stage: string, declared: unknown): StreamPolicy | undefined {
  const parsed = streamSettingsSchema.safeParse(declared ?? false);
  if (!parsed.success) throw new TypeError(`invalid stage ${stage}: static streaming must be true, false or { bufferBytes?, whenFull?: "pause" | "fail", transport?: "sse" | "ndjson" }`);
  const value = parsed.data;
  if (value === false) return undefined;
  const settings = value === true ? {} : value;
  return { bufferBytes: settings.bufferBytes ?? STREAM_BUFFER_BYTES, whenFull: settings.whenFull ?? "pause", transport: settings.transport ?? "sse" };
}

/**
 * Validates `appendWorker()` options. Throws a `TypeError` whose message names the stage and
 * the option at fault.
 */
export function resolveStageOptions(stage: string, options: StageOptions = {}, worker: { streaming?: unknown; stepwise?: boolean } = {}): ResolvedStageOptions {
  const parsed = stageOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `option '${issue.path.join(".")}'` : "options";
    const what = issue.code === "unrecognized_keys" ? `unknown option '${issue.keys.join("', '")}'` : `${where}: ${issue.message}`;
    throw new TypeError(`invalid stage ${stage}: ${what}`);
  }
  const { num, maxBatchSize, maxWaitMs, timeoutMs, route, env, isolation, maxActive, continuous, fanOut, gather, sizeOf, ...priority } = parsed.data;
  if (worker.stepwise !== true && (maxActive !== undefined || continuous !== undefined)) {
    throw new TypeError(`invalid stage ${stage}: options 'maxActive' and 'continuous' are for a StepWorker`);
  }
  if (env !== undefined && env.length !== num) {
    throw new TypeError(`invalid stage ${stage}: option 'env' has ${env.length} entries for num ${num}; give one per worker`);
  }
  const routes = [...new Set(Array.isArray(route) ? route : [route])];
  const stream = streamPolicy(stage, worker.streaming);
  const joins = worker.stepwise === true && continuous !== false;
  return { num, maxBatchSize, maxWaitMs, timeoutMs, routes, env, isolation, stream, maxActive: joins ? (maxActive ?? MAX_ACTIVE) : undefined, fanOut, gather, priority, sizeOf };
}
