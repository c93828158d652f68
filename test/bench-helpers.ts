/** Running `shoal bench` in a test and reading what it wrote; shared by its tests against Shoal and against MLServer. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./helpers.js";

const CLI = join(ROOT, "dist", "cli", "main.js");

/** What one run of `shoal bench` wrote. */
export interface BenchRun {
  code: number | null;
  stdout: string;
  stderr: string;
  csv: Record<string, string>[];
  json: { results: Record<string, unknown>[] };
  svg: string;
}

/** Runs `shoal bench ...args` on Node with CSV, JSON and plot written to a temporary folder, and reads them back. */
export async function bench(args: string[]): Promise<BenchRun> {
  const dir = mkdtempSync(join(tmpdir(), "shoal-bench-"));
  const files = { csv: join(dir, "out.csv"), json: join(dir, "out.json"), svg: join(dir, "out.svg") };
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    execFile(process.execPath, [CLI, "bench", ...args, "--csv", files.csv, "--json", files.json, "--plot", files.svg], { timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : null, stdout, stderr })),
  );
  const read = (file: string) => {
    try {
      return readFileSync(file, "utf8");
    } catch {
      return "";
    }
  };
  const [header, ...rows] = read(files.csv).trim().split("\n");
  const columns = header?.split(",") ?? [];
  const csv = rows.map((row) => Object.fromEntries(row.split(",").map((v, i) => [columns[i]!, v])));
  const text = read(files.json);
  const svg = read(files.svg);
  rmSync(dir, { recursive: true, force: true });
  return { code, stdout, stderr, csv, json: text === "" ? { results: [] } : JSON.parse(text), svg };
}

/** Checks a run succeeded with one row per level, each with answers and no error. */
export function assertLevels(run: BenchRun, levels: [mode: string, level: string][]): void {
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(
    run.csv.map((r) => [r.mode, r.level]),
    levels,
  );
  for (const row of run.csv) {
    assert.ok(Number(row.req_per_sec) > 0, JSON.stringify(row));
    assert.ok(Number(row.requests) > 0, JSON.stringify(row));
    assert.ok(Number(row.p50_ms) > 0 && Number(row.p50_ms) <= Number(row.p90_ms) && Number(row.p90_ms) <= Number(row.p99_ms), JSON.stringify(row));
    assert.equal(row.errors, "0", JSON.stringify(row));
    assert.ok(Number(row.windows) >= 3 && Number(row.windows) <= 4, JSON.stringify(row));
  }
  assert.equal(run.json.results.length, levels.length);
  assert.match(run.svg, /^<svg[^>]*>/);
  assert.match(run.svg, /<polyline /);
}

