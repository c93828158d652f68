/**
 * The runtimes a comparison runs its servers on: the harness's own Node (`node --import tsx`, the
 * default), Python for the peers, and Bun when it is installed. Bun is looked for in BENCH_BUN, then
 * in runtimes/ (pinned there, installed by `npm ci --prefix runtimes`), then in PATH; without it the
 * Bun contenders are reported as not measured, saying why, and the others run as usual.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Contender } from "./sweep.js";

/** What a server runs on; the peers' Python is named by its own version. */
export type RuntimeName = "node" | "bun" | "python";

/** A runtime found on this machine. */
export interface Runtime {
  /** The program to run: a path, or a name looked up in PATH. */
  program: string;
  /** Its version, without a leading "v" (e.g. "1.4.5"). */
  version: string;
}

/** How to install the pinned Bun. */
const BUN_INSTALL = "npm ci --prefix runtimes";

/** Bun, or why it cannot be used. Looked up once per process. */
export type BunLookup = { runtime: Runtime; missing?: undefined } | { runtime?: undefined; missing: string };

let found: BunLookup | undefined;

/**
 * Finds Bun: `BENCH_BUN` (a path or a command name) when set, else runtimes/node_modules/.bin/bun
 * under `root`, else `bun` from PATH. A candidate counts once `--version` answers.
 */
export function findBun(root: string): BunLookup {
  if (found !== undefined) return found;
  const configured = process.env.BENCH_BUN;
  const pinnedBun = join(root, "runtimes", "node_modules", ".bin", "bun");
  const candidates = configured !== undefined && configured !== "" ? [configured] : [...(existsSync(pinnedBun) ? [pinnedBun] : []), "bun"];
  for (const program of candidates) {
    const probe = spawnSync(program, ["--version"], { encoding: "utf8", timeout: 10_000 });
    if (probe.error === undefined && probe.status === 0) {
      found = { runtime: { program, version: probe.stdout.trim().replace(/^v/, "") } };
      return found;
    }
  }
  found = {
    missing:
      configured !== undefined && configured !== ""
        ? `BENCH_BUN=${configured} does not run (\`${configured} --version\` failed)`
        : `Bun is not installed (not in runtimes/node_modules/.bin nor in PATH); \`${BUN_INSTALL}\` installs the pinned one, or set BENCH_BUN`,
  };
  return found;
}

/**
 * The same server as `c`, run by Bun (`bun <script> ...`: Bun runs TypeScript itself), named
 * `<name>-bun` and described by `config`; without Bun, a contender that is not measured and says why.
 */
export function onBun(c: Contender, bun: BunLookup, config: string): Contender {
  if (c.spec === undefined) throw new Error(`${c.name} has no server to run on Bun`);
  const twin: Contender = { ...c, name: `${c.name}-bun`, config, spec: { ...c.spec, program: bun.runtime?.program ?? "bun", runtime: "bun" } };
  return bun.missing === undefined ? twin : { ...twin, unavailable: bun.missing };
}

/** A server's runtime as the results name it, e.g. "bun 1.4.5", from the run's versions. */
export function runtimeLabel(runtime: RuntimeName, versions: Record<string, string>): string {
  const version = versions[runtime];
  return version === undefined ? runtime : `${runtime} ${version.replace(/^v/, "")}`;
}
