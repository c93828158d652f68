/**
 * Benchmark runner: `npm run bench -- <scenario> [flags]` (or `node --import tsx bench/run.ts`).
 *
 * Each scenario is a module in bench/scenarios/ exporting `scenario`. Common flags (each with an
 * environment variable): --duration / BENCH_DURATION (seconds per point), --rounds / BENCH_ROUNDS,
 * --warmup / BENCH_WARMUP (seconds per server). Results go to bench/results/<scenario>.{json,md}.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { Scenario } from "./lib/scenario.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..");

function scenarioNames(): string[] {
  return readdirSync(join(here, "scenarios"))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => f.slice(0, -3))
    .sort();
}

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

function positiveNumber(name: string, value: string | undefined, fallback: number, integer = false): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) fail(`${name} must be a positive ${integer ? "whole " : ""}number, not '${value}'`);
  return n;
}

// The servers import "shoal", which resolves to dist/: it must exist and should not be stale.
function checkBuild(): void {
  const dist = join(root, "dist", "index.js");
  if (!existsSync(dist)) fail("dist/index.js is missing: run `npm run build` first (the servers import shoal from dist/)");
  const built = statSync(dist).mtimeMs;
  const newer: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (p.endsWith(".ts") && statSync(p).mtimeMs > built) newer.push(p.slice(root.length + 1));
    }
  };
  walk(join(root, "src"));
  if (newer.length > 0) {
    process.stderr.write(`bench: warning: ${newer.length} file(s) in src/ are newer than dist/ (e.g. ${newer[0]}); run \`npm run build\` to measure them\n`);
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const names = scenarioNames();
  const name = argv[0];
  if (name === undefined || name === "--help" || name === "-h") {
    process.stdout.write(
      [
        "usage: npm run bench -- <scenario> [flags]",
        `scenarios: ${names.join(", ")}`,
        "run `npm run bench -- <scenario> --help` for a scenario's flags",
        "",
      ].join("\n"),
    );
    return;
  }
  if (!names.includes(name)) fail(`unknown scenario '${name}'; known: ${names.join(", ")}`);
  const mod = (await import(pathToFileURL(join(here, "scenarios", `${name}.ts`)).href)) as { scenario: Scenario; defaults?: Partial<Record<"duration" | "rounds" | "warmup", number>> };
  const scenario = mod.scenario;
  const d = { duration: 10, rounds: 3, warmup: 3, ...mod.defaults };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv.slice(1),
      options: {
        duration: { type: "string" },
        rounds: { type: "string" },
        warmup: { type: "string" },
        "results-dir": { type: "string" },
        help: { type: "boolean", short: "h" },
        ...scenario.options,
      },
      allowPositionals: false,
    });
  } catch (err) {
    fail(`${(err as Error).message} (see \`npm run bench -- ${name} --help\`)`);
  }
  const v = parsed.values as Record<string, string | boolean | undefined>;
  if (v.help === true) {
    const lines = [
      `usage: npm run bench -- ${name} [flags]`,
      scenario.summary,
      "",
      `  --duration <s>      seconds per measured point (BENCH_DURATION; default ${d.duration})`,
      `  --rounds <n>        measured rounds per point; medians are reported (BENCH_ROUNDS; default ${d.rounds})`,
      `  --warmup <s>        warm-up seconds per server before measuring (BENCH_WARMUP; default ${d.warmup})`,
      "  --results-dir <dir> where to write <scenario>.json and .md (default bench/results)",
      ...Object.entries(scenario.help).map(([flag, text]) => `  --${flag.padEnd(18)}${text}`),
      "",
    ];
    process.stdout.write(lines.join("\n"));
    return;
  }
  checkBuild();
  const common = {
    durationSec: positiveNumber("--duration", (v.duration as string | undefined) ?? process.env.BENCH_DURATION, d.duration),
    rounds: positiveNumber("--rounds", (v.rounds as string | undefined) ?? process.env.BENCH_ROUNDS, d.rounds, true),
    warmupSec: positiveNumber("--warmup", (v.warmup as string | undefined) ?? process.env.BENCH_WARMUP, d.warmup),
  };
  const resultsDir = resolve(root, (v["results-dir"] as string | undefined) ?? join("bench", "results"));
  const t0 = Date.now();
  await scenario.run({
    common,
    values: v,
    root,
    resultsDir,
    log: (line) => process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${line}\n`),
  });
}

main().catch((err) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
