import { z } from "zod";

/** Paths a route may not take: the server answers them itself. */
export const RESERVED_PATHS = ["/", "/metrics", "/healthz", "/readyz", "/openapi.json", "/docs"] as const;

const routePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, "a route is a path that starts with '/'")
  .refine((p) => !(RESERVED_PATHS as readonly string[]).includes(p) && !p.startsWith("/docs/") && p !== "/v2" && !p.startsWith("/v2/"), {
    message: `reserved; ${RESERVED_PATHS.join(", ")}, /docs/… and /v2/… are the server's own`,
  });

const stageOptionsSchema = z.strictObject({
  num: z.number().int().min(1).default(1),
  maxBatchSize: z.number().int().min(1).default(1),
  maxWaitMs: z.number().min(0).default(10),
  timeoutMs: z.number().positive().optional(),
  route: z.union([routePath, z.array(routePath).min(1)]).default("/inference"),
  env: z.array(z.record(z.string(), z.string())).optional(),
  isolation: z.enum(["thread", "process"]).default("thread"),
});

/** Options of one stage, as given to `appendWorker()`. */
export interface StageOptions {
  /** Workers in parallel (default 1). */
  num?: number;
  /** Largest batch `forward()` receives (default 1: no batching). */
  maxBatchSize?: number;
  /** How long a batch may wait to fill after its oldest item arrived, in ms (default 10). */
  maxWaitMs?: number;
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
}

/** Where a stage's workers run: threads of the server's process, or child processes. */
export type Isolation = "thread" | "process";

/** Stage options after validation, with defaults filled in. */
export interface ResolvedStageOptions {
  num: number;
  maxBatchSize: number;
  maxWaitMs: number;
  timeoutMs: number | undefined;
  routes: string[];
  env: Record<string, string>[] | undefined;
  isolation: Isolation;
}

/**
 * Validates `appendWorker()` options. Throws a `TypeError` whose message names the stage and
 * the option at fault.
 */
export function resolveStageOptions(stage: string, options: StageOptions = {}): ResolvedStageOptions {
  const parsed = stageOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `option '${issue.path.join(".")}'` : "options";
    const what = issue.code === "unrecognized_keys" ? `unknown option '${issue.keys.join("', '")}'` : `${where}: ${issue.message}`;
    throw new TypeError(`invalid stage ${stage}: ${what}`);
  }
  const { num, maxBatchSize, maxWaitMs, timeoutMs, route, env, isolation } = parsed.data;
  if (env !== undefined && env.length !== num) {
    throw new TypeError(`invalid stage ${stage}: option 'env' has ${env.length} entries for num ${num}; give one per worker`);
  }
  const routes = [...new Set(Array.isArray(route) ? route : [route])];
  return { num, maxBatchSize, maxWaitMs, timeoutMs, routes, env, isolation };
}
