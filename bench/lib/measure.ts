/**
 * Measuring one point with wrk on a machine shared with other work: wait for it to be quiet,
 * run wrk while metering the CPU of the server and of everything else, and measure again when
 * other processes disturbed the point. Shared by the scenarios that compare servers under load.
 */
import { loadMeter, waitQuiet, type LoadReport } from "./machine.js";
import { fmtInt, fmtMs } from "./results.js";
import type { OptionSpec } from "./scenario.js";
import { spread, type Spread } from "./stats.js";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk.js";

/** Cores used by other processes above which a point is marked disturbed. */
export const DISTURBED = 0.25;

/** Whether other processes using `othersCores` cores during a point disturbed it. */
export function disturbedBy(othersCores: number): boolean {
  return othersCores > DISTURBED;
}

/** How points are guarded against other work on the machine. */
export interface QuietSettings {
  /** Before each point, wait up to this long for other processes to use < DISTURBED cores (0: don't wait). */
  quietWaitSec: number;
  /** Measure a disturbed point again, up to this many times. */
  retries: number;
}

/** The flags behind QuietSettings, for a scenario's `options` and `help`. */
export const quietOptions: OptionSpec = { "quiet-wait": { type: "string" }, retries: { type: "string" } };
export const quietHelp: Record<string, string> = {
  "quiet-wait <s>": `before each point, wait up to this long for other processes to use < ${DISTURBED} cores (BENCH_QUIET_WAIT; default 0: don't wait)`,
  "retries <n>": `measure a point again, up to n times, when other processes used more than ${DISTURBED} cores during it (BENCH_RETRIES; default 0)`,
};

/** Reads --quiet-wait and --retries (or BENCH_QUIET_WAIT and BENCH_RETRIES). */
export function quietSettings(values: Record<string, string | boolean | undefined>): QuietSettings {
  const quietWaitSec = Number((values["quiet-wait"] as string | undefined) ?? process.env.BENCH_QUIET_WAIT ?? 0);
  if (!Number.isFinite(quietWaitSec) || quietWaitSec < 0) throw new Error("--quiet-wait must be a number of seconds >= 0");
  const retries = Number((values.retries as string | undefined) ?? process.env.BENCH_RETRIES ?? 0);
  if (!Number.isInteger(retries) || retries < 0) throw new Error("--retries must be a whole number >= 0");
  return { quietWaitSec, retries };
}

/** A whole-number flag >= 1; exits with a message otherwise. */
export function wholeNumber(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`bench: ${name} must be a whole number >= 1, not '${value}'\n`);
    process.exit(2);
  }
  return n;
}

/** One wrk run against one server. */
export interface Measured {
  connections: number;
  durationSec: number;
  requestsPerSec: number;
  latencyMs: WrkResult["latency"];
  requests: number;
  non2xx: number;
  socketErrors: WrkResult["socketErrors"];
  /** CPU of the server (all threads, main, busiest other), of wrk, of the machine and of other processes, in cores. */
  load: LoadReport;
  /** Other processes used more than DISTURBED cores during the point. */
  disturbed: boolean;
  /** Seconds spent waiting for the machine to be quiet before the point, and the load then. */
  quietWait: { waitedSec: number; busy: number } | undefined;
  wrkCommand: string;
  wrkOutput: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs wrk once against the server `pid` serves, metering the CPU of the server and of everything else. */
export async function measureOnce(pid: number, wrk: WrkOptions, quietWait?: Measured["quietWait"]): Promise<Measured> {
  const meter = loadMeter(pid);
  const r = await runWrk(wrk);
  const load = meter.stop();
  return {
    connections: wrk.connections,
    durationSec: r.durationSec,
    requestsPerSec: r.requestsPerSec,
    latencyMs: r.latency,
    requests: r.requests,
    non2xx: r.non2xx,
    socketErrors: r.socketErrors,
    load,
    disturbed: disturbedBy(load.foreign),
    quietWait,
    wrkCommand: r.command,
    wrkOutput: r.raw,
  };
}

/**
 * Measures a point after waiting for a quiet machine, again (up to `retries` times) while other
 * processes disturb it. Returns the kept point and the discarded attempts.
 */
export async function measurePoint(
  pid: number,
  wrk: WrkOptions,
  quiet: QuietSettings,
  log: (line: string) => void,
  label: string,
): Promise<{ point: Measured; discarded: Measured[] }> {
  const discarded: Measured[] = [];
  for (;;) {
    let quietWait: Measured["quietWait"];
    if (quiet.quietWaitSec > 0) {
      quietWait = await waitQuiet(DISTURBED, quiet.quietWaitSec);
      if (quietWait.busy > DISTURBED) log(`  machine still busy (${quietWait.busy} cores used by other processes) after waiting ${quietWait.waitedSec} s; measuring anyway`);
    } else await sleep(300);
    const point = await measureOnce(pid, wrk, quietWait);
    if (!point.disturbed || discarded.length >= quiet.retries) return { point, discarded };
    discarded.push(point);
    log(`  ${label}: other processes used ${point.load.foreign.toFixed(2)} cores (${fmtInt(point.requestsPerSec)} req/s); measuring again (${discarded.length}/${quiet.retries})`);
  }
}

/** Non-2xx answers and socket errors of a point. */
export function errorsOf(m: Measured): number {
  const s = m.socketErrors;
  return m.non2xx + s.connect + s.read + s.write + s.timeout;
}

/** One progress line for a point. */
export function describePoint(label: string, m: Measured): string {
  const cpu = m.load.server;
  const bad = errorsOf(m);
  return (
    `  ${label} ${fmtInt(m.requestsPerSec).padStart(7)} req/s  p50 ${fmtMs(m.latencyMs.p50)} ms  p99 ${fmtMs(m.latencyMs.p99)} ms  ` +
    `server CPU ${cpu.total.toFixed(2)} cores (main ${cpu.main.toFixed(2)}, next ${cpu.busiestOther.toFixed(2)}), wrk ${m.load.wrk.toFixed(2)}, others ${m.load.foreign.toFixed(2)}` +
    `${m.disturbed ? " DISTURBED" : ""}${bad > 0 ? `  ERRORS: non-2xx ${m.non2xx}, socket ${JSON.stringify(m.socketErrors)}` : ""}`
  );
}

/** The order of `names` in round `round` (1-based): swapped every other round, so a drift in the machine favours no one. */
export function alternate<T>(names: readonly T[], round: number): T[] {
  return round % 2 === 1 ? [...names] : [...names].reverse();
}

/** Medians over the rounds of one server at one load. */
export interface Summary {
  requestsPerSec: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  errors: number;
  /** Server CPU, cores (median). */
  cpu: number;
  disturbed: number;
}

export function summarise(points: readonly Measured[]): Summary {
  return {
    requestsPerSec: spread(points.map((p) => p.requestsPerSec)),
    p50Ms: spread(points.map((p) => p.latencyMs.p50)),
    p99Ms: spread(points.map((p) => p.latencyMs.p99)),
    errors: points.reduce((a, p) => a + errorsOf(p), 0),
    cpu: spread(points.map((p) => p.load.server.total)).median,
    disturbed: points.filter((p) => p.disturbed).length,
  };
}

/** Table cells for a summary: req/s (median), range, p50, p99, errors, server CPU, disturbed. */
export const SUMMARY_HEADERS = ["req/s (median)", "req/s range", "p50 ms", "p99 ms", "errors", "server CPU", "disturbed"];
export const SUMMARY_ALIGN = ["r", "r", "r", "r", "r", "r", "r"] as const;
export function summaryCells(s: Summary): string[] {
  const r = s.requestsPerSec;
  return [fmtInt(r.median), `${fmtInt(r.min)}–${fmtInt(r.max)}`, fmtMs(s.p50Ms.median), fmtMs(s.p99Ms.median), String(s.errors), s.cpu.toFixed(2), `${s.disturbed}/${r.n}`];
}
