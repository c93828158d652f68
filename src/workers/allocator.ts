import { availableParallelism } from "node:os";

/**
 * How glibc's malloc is set up for a process that holds models (docs/benchmarks.md, "Memory per
 * model and per worker"):
 *
 * - glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), so that later
 *   blocks of that size come from the heap instead. The copies of the weights ONNX Runtime makes
 *   while it builds a session, freed once it is built, then leave holes in the heap that stay
 *   resident: 2–3 MiB for each model of 5 MiB of weights. With the threshold fixed at 256 KiB,
 *   large blocks are always mapped on their own and go back to the system when freed.
 * - glibc gives threads up to 8 arenas per core, each holding freed memory of its own; one per
 *   core is as many as can run at once, and saves about 8 MiB with two workers on two cores.
 *
 * glibc reads its tunables once, when the process starts: `shoal serve` starts itself again with
 * them where Node can (`process.execve`, Node 22.15 and later), and worker processes are started
 * with them. Elsewhere than glibc the variable is ignored.
 */
export const MALLOC_TUNABLES = `glibc.malloc.mmap_threshold=262144:glibc.malloc.arena_max=${availableParallelism()}`;

/** Whether `env` already says how glibc's malloc is set up: it is then left as it is. */
export function mallocTuned(env: NodeJS.ProcessEnv): boolean {
  return /(^|[:,])glibc\.malloc\./.test(env.GLIBC_TUNABLES ?? "") || Object.keys(env).some((name) => name.startsWith("MALLOC_") && name.endsWith("_"));
}

/** `env` with {@link MALLOC_TUNABLES} added to its `GLIBC_TUNABLES`, unless it sets up malloc already. */
export function withMallocTunables<E extends NodeJS.ProcessEnv>(env: E): E {
  if (mallocTuned(env)) return env;
  const others = env.GLIBC_TUNABLES;
  return { ...env, GLIBC_TUNABLES: others ? `${others}:${MALLOC_TUNABLES}` : MALLOC_TUNABLES };
}

/**
 * V8's semi-spaces for a process started again by `shoal serve`: Node 24 lets the HTTP thread's
 * young generation grow to 128 MiB under load (Node 20 to 32), which nearly doubled the peak of a
 * burst; 16 MiB semi-spaces, Node 20's size, kept the peak at Node 20's with the same throughput
 * (docs/deploy.md#memory). Flags or `NODE_OPTIONS` that set them are left as they are.
 */
export function withYoungGenerationCap(execArgv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const set = [...execArgv, ...(env.NODE_OPTIONS ?? "").split(/\s+/)].some((flag) => /^--max[-_]semi[-_]space[-_]size\b/.test(flag));
  return set ? [...execArgv] : ["--max-semi-space-size=16", ...execArgv];
}
