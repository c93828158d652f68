/**
 * Shoal before and after a change, side by side in one run. `--against <dir>` (or BENCH_AGAINST)
 * names another checkout of Shoal with its own dist/ built (bench/tools/checkout.sh makes one from
 * a commit). Every Shoal server of a comparison scenario then runs twice in the same sweep: from
 * this tree ("after", its usual name) and from that folder ("before", `<name>@before`); at each load
 * of each round the two are measured back to back, the first of them swapped every round, so that
 * drift in a shared machine hits both alike. The report pairs those two points.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync } from "node:fs";
import { join, resolve } from "node:path";
import { gitState } from "./machine.js";
import { DISTURBED, disturbedBy } from "./measure.js";
import { cacheDir } from "./peers.js";
import { fmtInt, fmtMs, markdownTable, textTable } from "./results.js";
import { median, spread, type Spread } from "./stats.js";
import type { Contender, Headline, Point, SweepResult } from "./sweep.js";

/** The checkout measured as "before". */
export interface Checkout {
  dir: string;
  commit: string;
  srcDirty: boolean;
}

/** The suffix of a server's name when it runs from the "before" checkout. */
export const BEFORE = "@before";

/** Largest slowdown that still counts as unchanged: req/s may drop and CPU per request grow by this share. */
export const TOLERANCE = 0.03;

/** Where bench/tools/checkout.sh records the commit it extracted (a `git archive` has no .git). */
export const COMMIT_FILE = ".commit";

/**
 * Reads `--against` (or BENCH_AGAINST): the folder must hold a built Shoal, node_modules, and
 * bench/.cache shared with this tree (the generated models are then the same files).
 */
export function againstCheckout(root: string, value: string | undefined): Checkout | undefined {
  if (value === undefined || value === "") return undefined;
  const dir = resolve(value);
  const prepare = `prepare it with \`bash bench/tools/checkout.sh <commit> ${value}\``;
  const missing = ["dist/index.js", "node_modules", "bench/.cache"].filter((f) => !existsSync(join(dir, f)));
  if (missing.length > 0) throw new Error(`--against ${value}: ${missing.join(", ")} missing there; ${prepare}`);
  mkdirSync(cacheDir(root), { recursive: true });
  if (realpathSync(join(dir, "bench", ".cache")) !== realpathSync(cacheDir(root))) throw new Error(`--against ${value}: its bench/.cache must be a link to ${cacheDir(root)}; ${prepare}`);
  const recorded = join(dir, COMMIT_FILE);
  return existsSync(recorded) ? { dir, commit: readFileSync(recorded, "utf8").trim(), srcDirty: false } : { dir, ...gitState(dir) };
}

/** The contenders, each Shoal server followed by its twin run from `before` (unchanged without one). */
export function withTwins(contenders: readonly Contender[], before: Checkout | undefined): Contender[] {
  if (before === undefined) return [...contenders];
  return contenders.flatMap((c) =>
    c.shoal === true && c.spec !== undefined ? [c, { ...c, name: `${c.name}${BEFORE}`, config: `${c.config}; run from ${before.dir} (commit ${before.commit.slice(0, 12)})`, cwd: before.dir }] : [c],
  );
}

/**
 * A server's name without the suffixes of its variants: the twin from another checkout
 * (`@before`) and those with tracing on (`+trace…`, bench/lib/tracing-variants.ts).
 */
export function baseName(name: string): string {
  return name.split(/[@+]/)[0]!;
}

/** The contenders in groups measured back to back: a Shoal server with its twin and variants, any other alone. */
export function twinGroups<C extends { name: string }>(contenders: readonly C[]): C[][] {
  const groups = new Map<string, C[]>();
  for (const c of contenders) {
    const base = baseName(c.name);
    groups.set(base, [...(groups.get(base) ?? []), c]);
  }
  return [...groups.values()];
}

/** One Shoal server at one load, before and after. */
export interface Comparison {
  server: string;
  connections: number;
  before: Figures;
  after: Figures;
  /** after / before req/s, one per round (the two points of a round measured back to back). */
  rpsRatio: Spread;
  /** after / before server CPU per request, one per round. */
  cpuRatio: Spread;
  /** req/s did not drop, nor CPU per request grow, by more than TOLERANCE (medians of the ratios). */
  within: boolean;
  /** Rounds kept although other processes used more than DISTURBED cores during a point of the pair (retries spent). */
  disturbed: number;
}

/** Medians over rounds of one side. */
export interface Figures {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerRequest: number;
}

function figures(ps: readonly Point[]): Figures {
  const med = (f: (p: Point) => number) => median(ps.map(f));
  return { requestsPerSec: med((p) => p.requestsPerSec), p50Ms: med((p) => p.latencyMs.p50), p99Ms: med((p) => p.latencyMs.p99), cpuUsPerRequest: med((p) => p.cpuUsPerRequest) };
}

// after / before of a figure, per round in which both sides were measured.
function pairedRatios(after: readonly Point[], before: readonly Point[], f: (p: Point) => number): number[] {
  return after.flatMap((a) => {
    const b = before.find((p) => p.round === a.round);
    return b === undefined ? [] : [f(a) / f(b)];
  });
}

/** The median over every round and load of `after`/`before` of a figure of two servers of one run. */
export function overallRatio(result: SweepResult, after: string, before: string, f: (p: Point) => number): number {
  const at = (name: string, n: number) => result.points.filter((p) => p.server === name && p.connections === n);
  return median(result.settings.connections.flatMap((n) => pairedRatios(at(after, n), at(before, n), f)));
}

/** Before and after of every Shoal server that has a twin, at every load; empty without `--against`. */
export function compare(result: SweepResult): Comparison[] {
  const names = result.contenders.map((c) => c.name);
  return comparePairs(result, names.filter((n) => names.includes(`${n}${BEFORE}`)).map((n) => ({ after: n, before: `${n}${BEFORE}` })));
}

/** Two servers of one run at every load, `after` against `before` (the first of the pair is named `server`). */
export function comparePairs(result: SweepResult, pairs: readonly { after: string; before: string }[]): Comparison[] {
  const out: Comparison[] = [];
  for (const pair of pairs) {
    const server = pair.after;
    for (const connections of result.settings.connections) {
      const at = (name: string) => result.points.filter((p) => p.server === name && p.connections === connections);
      const after = at(pair.after);
      const before = at(pair.before);
      if (after.length === 0 || before.length === 0) continue;
      const rpsRatio = spread(pairedRatios(after, before, (p) => p.requestsPerSec));
      const cpuRatio = spread(pairedRatios(after, before, (p) => p.cpuUsPerRequest));
      const within = rpsRatio.median >= 1 - TOLERANCE && !(cpuRatio.median > 1 + TOLERANCE);
      const rounds = new Set([...after, ...before].filter((p) => disturbedBy(p.othersCores)).map((p) => p.round));
      out.push({ server, connections, before: figures(before), after: figures(after), rpsRatio, cpuRatio, within, disturbed: rounds.size });
    }
  }
  return out;
}

const ratio = (s: Spread) => (Number.isFinite(s.median) ? `${s.median.toFixed(3)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : "n/a");
const us = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "n/a");
const pct = Math.round(TOLERANCE * 100);

/**
 * A table of comparisons, as Markdown and as text: `before` and `after` name the two sides in the
 * headers; `verdict` adds whether each is within the tolerance.
 */
export function comparisonTable(comparisons: readonly Comparison[], before: string, after: string, verdict: boolean): { markdown: string; text: string } {
  const headers = ["server", "conns", `req/s ${before}`, `req/s ${after}`, `${after}/${before}`, `p50 ms ${before}`, `p50 ${after}`, `p99 ms ${before}`, `p99 ${after}`, `CPU µs/req ${before}`, `CPU ${after}`, `${after}/${before}`, "disturbed", ...(verdict ? ["verdict"] : [])];
  const align = ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l"] as const;
  const rows = comparisons.map((c) => [
    c.server,
    String(c.connections),
    fmtInt(c.before.requestsPerSec),
    fmtInt(c.after.requestsPerSec),
    ratio(c.rpsRatio),
    fmtMs(c.before.p50Ms),
    fmtMs(c.after.p50Ms),
    fmtMs(c.before.p99Ms),
    fmtMs(c.after.p99Ms),
    us(c.before.cpuUsPerRequest),
    us(c.after.cpuUsPerRequest),
    ratio(c.cpuRatio),
    `${c.disturbed}/${c.rpsRatio.n}`,
    ...(verdict ? [c.within ? `within ${pct}%` : `NOT within ${pct}%`] : []),
  ]);
  return { markdown: markdownTable(headers, rows, align), text: textTable(headers, rows, align) };
}

/**
 * The before/after part of a report: a Markdown section, the same table as text, and one headline
 * per Shoal server (after/before req/s and before/after CPU per request, medians over every round
 * and load). Undefined without `--against`.
 */
export function comparisonReport(result: SweepResult): { markdown: string[]; text: string; headline: Headline[] } | undefined {
  const before = result.against;
  const comparisons = compare(result);
  if (before === undefined || comparisons.length === 0) return undefined;
  const headline: Headline[] = [];
  for (const server of new Set(comparisons.map((c) => c.server))) {
    const all = (f: (p: Point) => number) => overallRatio(result, server, `${server}${BEFORE}`, f);
    const note = "median over every round and load";
    headline.push(
      { what: `${server}: after / before req/s`, value: all((p) => p.requestsPerSec), goal: 1 - TOLERANCE, unit: "x", note },
      { what: `${server}: before / after server CPU per request`, value: 1 / all((p) => p.cpuUsPerRequest), goal: 1 - TOLERANCE, unit: "x", note },
    );
  }
  const table = comparisonTable(comparisons, "before", "after", true);
  const markdown = [
    "## Before and after",
    "",
    `Shoal from this tree (after: commit ${result.git.commit.slice(0, 12)}${result.git.srcDirty ? " with uncommitted changes in src/" : ""}) and from \`${before.dir}\` ` +
      `(before: commit ${before.commit.slice(0, 12)}${before.srcDirty ? " with uncommitted changes in src/" : ""}), side by side in this run: \`<server>${BEFORE}\` is the before. ` +
      "req/s, p50 and p99 are medians over the rounds; the ratios are medians over the rounds of after/before, the two points of a round measured at the same load back to back (their range in brackets). " +
      `**disturbed**: rounds in which other processes used more than ${DISTURBED} cores during a point of the pair (kept once \`--retries\` were spent), so less to be trusted. ` +
      `CPU µs/req is the server's CPU time (all threads and processes) per answered request. **within ${pct}%**: req/s after/before ≥ ${(1 - TOLERANCE).toFixed(2)} and CPU after/before ≤ ${(1 + TOLERANCE).toFixed(2)}.`,
    "",
    table.markdown,
    "",
  ];
  return { markdown, text: table.text, headline };
}
