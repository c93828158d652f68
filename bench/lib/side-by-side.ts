/**
 * Servers of one benchmark side by side on a shared machine: all started at once (idle ones cost
 * nothing), then each point measured on each in turn, closed loop, over rounds whose order
 * alternates, so that a drift of the machine favours no one. Shared by the lengths and wait-sweep
 * scenarios; a point is answers a second, p50 and p99, and what chosen counters of the server
 * rose by meanwhile.
 */
import { closedLoop, counterTotal, type Ask } from "./http-load.js";
import { alternate } from "./measure.js";
import { startServer, freePort, type RunningServer, type ServerSpec } from "./server.js";
import { median, percentile } from "./stats.js";

/** One server of the comparison. */
export type Contender = Pick<ServerSpec, "name" | "script" | "args" | "env">;

/** One measured point of one server. */
export interface ClosedPoint {
  name: string;
  streams: number;
  round: number;
  /** Answers 200 a second. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers other than 200. */
  errors: number;
  /** What each counter rose by during the point. */
  counters: Record<string, number>;
  /** The p99 of the answers 200 of each class of request, when the load has classes. */
  p99ByClass: Record<string, number>;
}

export interface SideBySide {
  cwd: string;
  contenders: readonly Contender[];
  /** The loads: concurrent clients. */
  streams: readonly number[];
  rounds: number;
  seconds: number;
  warmupSec: number;
  /** The load's request `index`. */
  make: (index: number) => Ask;
  probe: ServerSpec["probe"];
  counters: readonly string[];
  /** The class of the load's request `index` (its length, its priority), for a p99 of each. */
  classOf?: (index: number) => string;
  log: (line: string) => void;
}

/** Measures every contender at every load, `rounds` times; resolves with every point and each server's command. */
export async function sideBySide(s: SideBySide): Promise<{ points: ClosedPoint[]; commands: Record<string, string> }> {
  const servers: RunningServer[] = [];
  const points: ClosedPoint[] = [];
  try {
    for (const c of s.contenders) {
      const port = await freePort();
      servers.push(await startServer({ ...c, args: c.args.map((a) => a.replaceAll("{port}", String(port))), port, cwd: s.cwd, probe: s.probe }));
    }
    for (const server of servers) await closedLoop(server.port, Math.max(...s.streams), s.warmupSec, s.make);
    for (let round = 1; round <= s.rounds; round++) {
      for (const streams of s.streams) {
        for (const server of alternate(servers, round)) {
          const before = await Promise.all(s.counters.map((name) => counterTotal(server.url, name)));
          const run = await closedLoop(server.port, streams, s.seconds, s.make);
          const after = await Promise.all(s.counters.map((name) => counterTotal(server.url, name)));
          const good = run.answers.filter((a) => a.status === 200);
          const ok = good.map((a) => a.ms);
          const p99ByClass: Record<string, number> = {};
          for (const key of new Set(good.map((a) => s.classOf?.(a.index) ?? ""))) if (key !== "") p99ByClass[key] = percentile(good.filter((a) => s.classOf!(a.index) === key).map((a) => a.ms), 99);
          const point: ClosedPoint = {
            name: server.name,
            streams,
            round,
            rps: ok.length / run.seconds,
            p50Ms: percentile(ok, 50),
            p99Ms: percentile(ok, 99),
            errors: run.answers.length - ok.length,
            counters: Object.fromEntries(s.counters.map((name, i) => [name, after[i]! - before[i]!])),
            p99ByClass,
          };
          points.push(point);
          const classes = Object.entries(p99ByClass).map(([key, ms]) => `${key} ${ms.toFixed(0)}`).join(", ");
          s.log(`${point.name} at ${streams} streams, round ${round}: ${point.rps.toFixed(0)}/s, p50 ${point.p50Ms.toFixed(1)} ms, p99 ${point.p99Ms.toFixed(1)} ms${classes === "" ? "" : ` (p99 by class: ${classes})`}, errors ${point.errors}`);
        }
      }
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
  return { points, commands: Object.fromEntries(servers.map((server) => [server.name, server.command])) };
}

/** The medians over the rounds of one server at one load. */
export function medianPoint(points: readonly ClosedPoint[], name: string, streams: number): { rps: number; p50Ms: number; p99Ms: number; errors: number; counters: Record<string, number> } {
  const mine = points.filter((p) => p.name === name && p.streams === streams);
  const counters: Record<string, number> = {};
  for (const key of Object.keys(mine[0]?.counters ?? {})) counters[key] = median(mine.map((p) => p.counters[key]!));
  return { rps: median(mine.map((p) => p.rps)), p50Ms: median(mine.map((p) => p.p50Ms)), p99Ms: median(mine.map((p) => p.p99Ms)), errors: mine.reduce((n, p) => n + p.errors, 0), counters };
}
