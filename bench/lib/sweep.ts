/**
 * Side-by-side comparisons: several servers (Shoal, its peers, a plain Node server) doing the same
 * work, each swept over a list of concurrencies with wrk, in interleaved rounds, in one run.
 *
 * A scenario describes its contenders; `sweep()` starts them, warms each up, measures every
 * (round, concurrency, server) point after waiting for a quiet machine, and stops them;
 * `report()` writes <scenario>.json (every point), <scenario>.md and two SVG plots, and prints the
 * headline ratios.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { layouts, type Layout } from "../scenarios/core.js";
import { againstCheckout, comparisonReport, twinGroups, withTwins, type Checkout } from "./against.js";
import { describeCpus, gitState, loadMeter, machineInfo, treeCpuSeconds, waitQuiet, type MachineInfo } from "./machine.js";
import { alternate, DISTURBED, disturbedBy } from "./measure.js";
import { nodeVersions, peerVersions } from "./peers.js";
import { fmtInt, fmtMs, markdownTable, textTable, writeResults } from "./results.js";
import { findBun, runtimeLabel, type RuntimeName } from "./runtimes.js";
import type { ScenarioContext } from "./scenario.js";
import { freePort, portEnv, startServer, type RunningServer, type ServerSpec } from "./server.js";
import { spread, type Spread } from "./stats.js";
import { lineChart } from "../../src/bench/svg.js";
import { startSpanSink, tracingRatios, tracingReport, withTracing, type SpanSink } from "./tracing-variants.js";
import { runWrk, wrkVersion, type WrkResult } from "./wrk.js";

/** One server of a comparison, or a peer that cannot take part (then `unavailable` says why). */
export interface Contender {
  name: string;
  /** How it is configured, for the results. */
  config: string;
  unavailable?: string;
  /** How to start it; the port, cwd and CPUs are filled in. */
  spec?: Omit<ServerSpec, "name" | "port" | "cwd" | "cpus">;
  /** The request wrk sends: path, body, and the Lua script (default bench/lua/post-json.lua). */
  path: string;
  body: string;
  lua?: string;
  wrkEnv?: Record<string, string>;
  /** wrk's timeout per request (default 5 s): a request not answered by then counts as a socket timeout. */
  wrkTimeoutSec?: number;
  /** A Prometheus histogram of batch sizes on GET /metrics (same port): the mean batch per point is recorded. */
  batchMetric?: string;
  /** Only the histogram's series whose labels contain this text, e.g. one stage's (default all). */
  batchLabel?: string;
  /** The server runs this checkout's Shoal: `--against` measures it from both checkouts. */
  shoal?: boolean;
  /** Where the server is started (default: the repository root). */
  cwd?: string;
}

export interface Point {
  server: string;
  connections: number;
  round: number;
  requestsPerSec: number;
  latencyMs: WrkResult["latency"];
  requests: number;
  non2xx: number;
  socketErrors: number;
  /** Mean batch size formed during the point, from the server's /metrics. */
  meanBatch?: number;
  /** Server CPU time (all threads and child processes) per answered request, µs. */
  cpuUsPerRequest: number;
  /** Cores used by other processes during the point (not the server, wrk or the harness). */
  othersCores: number;
  quietWait: { waitedSec: number; busy: number };
  wrkCommand: string;
}

export interface Cell {
  server: string;
  connections: number;
  requestsPerSec: Spread;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  meanBatch?: number;
  /** Server CPU µs per request (median over rounds). */
  cpuUsPerRequest: number;
}

/** A ratio the scenario is judged by, with its goal. */
export interface Headline {
  what: string;
  value: number;
  /** e.g. ">= 1": the ratio meets its goal when value >= goal. */
  goal: number;
  /** How the value is shown: a ratio ("1.23×") or a share ("87%"). */
  unit: "x" | "%";
  note?: string;
}

export interface SweepResult {
  scenario: string;
  title: string;
  date: string;
  invocation: string;
  machine: MachineInfo;
  git: { commit: string; srcDirty: boolean };
  /** The checkout the Shoal servers were also run from (`--against`), as `<name>@before`. */
  against?: Checkout;
  versions: Record<string, string>;
  layout: { name: string; servers: string; wrk: string; note: string };
  settings: { connections: number[]; rounds: number; durationSec: number; warmupSec: number; quietWaitSec: number; retries: number };
  contenders: { name: string; runtime: RuntimeName; config: string; unavailable?: string; command?: string; path: string; body: string }[];
  cells: Cell[];
  points: Point[];
  /** Points measured again (`--retries`) because other processes disturbed them. */
  discarded: Point[];
  /** Scenario-specific measurements (memory, in-process limit, ...). */
  extra: Record<string, unknown>;
  headline: Headline[];
}

/** The flags every comparison scenario takes, for Scenario.options and Scenario.help. */
export const sweepOptions = {
  options: {
    connections: { type: "string" },
    servers: { type: "string" },
    layout: { type: "string" },
    "quiet-wait": { type: "string" },
    retries: { type: "string" },
    against: { type: "string" },
    tracing: { type: "string" },
  },
  help: {
    "connections <list>": "concurrencies to sweep, comma-separated (default 1,8,32,64,128)",
    "servers <list>": "only these servers, comma-separated (e.g. shoal: no Python peers needed)",
    "layout <name>": "pinned (servers on one core, wrk on another) or unpinned",
    "quiet-wait <s>": "before each point, wait up to this long for other processes to use < 0.25 cores (BENCH_QUIET_WAIT; default 5)",
    "retries <n>": `measure a server (with its twin under --against) again at that load, up to n times, when other processes used more than ${DISTURBED} cores during it (BENCH_RETRIES; default 0)`,
    "against <dir>": "also run every Shoal server from another checkout (made by bench/tools/checkout.sh), as <name>@before, and report before/after (BENCH_AGAINST)",
    "tracing <ratios>": "also run every Shoal server with tracing on at each sampling ratio (e.g. 0.01,1), as <name>+trace<percent>, spans sent to a receiver in the harness, and report traced/off (BENCH_TRACING)",
  },
} as const;

export interface SweepSettings {
  connections: number[];
  servers: string[] | undefined;
  layout: Layout;
  quietWaitSec: number;
  /** How many times a disturbed point (or pair of twins) is measured again. */
  retries: number;
  /** The other checkout Shoal is also run from. */
  against: Checkout | undefined;
  /** The sampling ratios Shoal is also run with, tracing on. */
  tracing: number[] | undefined;
}

/** Reads the common flags; `defaultLayout` is the scenario's choice of CPU layout. */
export function sweepSettings(ctx: ScenarioContext, defaultLayout: "pinned" | "unpinned"): SweepSettings {
  const v = ctx.values;
  const list = (s: string | undefined) => s?.split(",").map((x) => x.trim()).filter((x) => x.length > 0);
  const connections = (list(v.connections as string | undefined) ?? ["1", "8", "32", "64", "128"]).map(Number);
  if (!connections.every((c) => Number.isInteger(c) && c >= 1)) throw new Error("--connections must be whole numbers >= 1, comma-separated");
  const wanted = (v.layout as string | undefined) ?? defaultLayout;
  const all = layouts();
  let layout = all.get(wanted);
  if (layout === undefined || wanted === "pinned-2core") throw new Error(`--layout must be pinned or unpinned, not '${wanted}'`);
  if (typeof layout === "string") {
    ctx.log(`layout ${wanted} is not possible here (${layout}): running unpinned`);
    layout = all.get("unpinned") as Layout;
  }
  const quietWaitSec = Number((v["quiet-wait"] as string | undefined) ?? process.env.BENCH_QUIET_WAIT ?? 5);
  if (!Number.isFinite(quietWaitSec) || quietWaitSec < 0) throw new Error("--quiet-wait must be a number of seconds >= 0");
  const retries = Number((v.retries as string | undefined) ?? process.env.BENCH_RETRIES ?? 0);
  if (!Number.isInteger(retries) || retries < 0) throw new Error("--retries must be a whole number >= 0");
  const against = againstCheckout(ctx.root, (v.against as string | undefined) ?? process.env.BENCH_AGAINST);
  const tracing = tracingRatios((v.tracing as string | undefined) ?? process.env.BENCH_TRACING);
  return { connections, servers: list(v.servers as string | undefined), layout, quietWaitSec, retries, against, tracing };
}

/** Whether the run includes a Python peer, i.e. needs the venv. */
export function wantsPeers(s: SweepSettings, peers: readonly string[]): boolean {
  return s.servers === undefined || s.servers.some((name) => peers.includes(name));
}

/** Sum and count of a Prometheus histogram, over its label sets (those whose labels contain `label`). */
async function histogramTotals(url: string, metric: string, label = ""): Promise<{ sum: number; count: number } | undefined> {
  try {
    const text = await (await fetch(url, { signal: AbortSignal.timeout(2000) })).text();
    let sum = 0;
    let count = 0;
    for (const line of text.split("\n")) {
      if (!line.includes(label)) continue;
      if (line.startsWith(`${metric}_sum`)) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
      else if (line.startsWith(`${metric}_count`)) count += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
    return { sum, count };
  } catch {
    return undefined;
  }
}

/** Called with the running servers, by name: once all have started (before any load), and after the sweep. */
export interface SweepHooks {
  afterStart?(servers: Map<string, RunningServer>): Promise<void>;
  /**
   * Called at the start of each round, on a quiet machine, with no load on the servers: for a
   * measurement that the servers' figures are compared with, so that both see the same machine.
   */
  eachRound?(round: number): Promise<void>;
  afterSweep?(servers: Map<string, RunningServer>): Promise<void>;
}

/** Starts the contenders, measures them, stops them. */
export async function sweep(ctx: ScenarioContext, scenario: string, title: string, contenders: Contender[], s: SweepSettings, hooks: SweepHooks = {}): Promise<SweepResult> {
  const { common, root, log } = ctx;
  const sink: SpanSink | undefined = s.tracing === undefined ? undefined : await startSpanSink();
  const chosen = withTracing(
    withTwins(
      contenders.filter((c) => s.servers === undefined || s.servers.includes(c.name)),
      s.against,
    ),
    s.tracing,
    sink?.url ?? "",
  );
  const { layout } = s;
  log(`${scenario}: ${chosen.map((c) => c.name).join(", ")}; connections ${s.connections.join(", ")}; ${common.rounds} rounds of ${common.durationSec} s; warm-up ${common.warmupSec} s`);
  log(`CPU layout ${layout.name}: servers on ${describeCpus(layout.server)}, wrk on ${describeCpus(layout.wrk)} (${layout.note})`);
  const servers = new Map<string, RunningServer>();
  const failed = new Map<string, string>();
  const points: Point[] = [];
  const discarded: Point[] = [];
  try {
    for (const c of chosen) {
      if (c.unavailable !== undefined || c.spec === undefined) {
        log(`  ${c.name} not measured: ${c.unavailable ?? "no way to start it"}`);
        continue;
      }
      log(`  starting ${c.name}: ${c.config}`);
      try {
        const port = await freePort();
        // Environment values may name the port ({port}) or ask for another free one ({free}), e.g. MLServer's gRPC and metrics ports.
        servers.set(c.name, await startServer({ ...c.spec, env: await portEnv(c.spec.env ?? {}, port), name: c.name, port, cwd: c.cwd ?? root, cpus: layout.server }));
      } catch (err) {
        // A peer that does not start is reported as such, not left out.
        failed.set(c.name, `did not start: ${(err as Error).message.split("\n")[0]}`);
        log(`  ${c.name} ${failed.get(c.name)}`);
      }
    }
    const running = chosen.filter((c) => servers.has(c.name));
    const nameWidth = Math.max(8, ...running.map((c) => c.name.length));
    await hooks.afterStart?.(servers);
    const measure = async (c: Contender, connections: number, seconds: number) => {
      const server = servers.get(c.name)!;
      const metricsUrl = `${server.url}/metrics`;
      const before = c.batchMetric === undefined ? undefined : await histogramTotals(metricsUrl, c.batchMetric, c.batchLabel);
      const cpu0 = treeCpuSeconds(server.pid);
      const load = loadMeter(server.pid);
      const r = await runWrk({
        url: server.url + c.path,
        connections,
        durationSec: seconds,
        script: c.lua ?? join("bench", "lua", "post-json.lua"),
        cwd: root,
        env: { WRK_BODY: c.body, ...c.wrkEnv },
        timeoutSec: c.wrkTimeoutSec,
        cpus: layout.wrk,
      });
      const cpuUsPerRequest = ((treeCpuSeconds(server.pid) - cpu0) / r.requests) * 1e6;
      const othersCores = load.stop().foreign;
      const after = c.batchMetric === undefined ? undefined : await histogramTotals(metricsUrl, c.batchMetric, c.batchLabel);
      const meanBatch = before !== undefined && after !== undefined && after.count > before.count ? (after.sum - before.sum) / (after.count - before.count) : undefined;
      return { r, meanBatch, cpuUsPerRequest, othersCores };
    };
    const maxConnections = Math.max(...s.connections);
    for (const c of running) {
      log(`  warm-up ${c.name} (${common.warmupSec} s at ${maxConnections} connections)`);
      await measure(c, maxConnections, common.warmupSec);
    }
    for (let round = 1; round <= common.rounds; round++) {
      if (hooks.eachRound !== undefined) {
        await waitQuiet(0.25, s.quietWaitSec);
        await hooks.eachRound(round);
      }
      for (const connections of s.connections) {
        // Rotate the order each round, so a drift in the machine does not favour one server. A
        // Shoal server and its twin from the other checkout are measured back to back after one
        // wait for quiet (the first of the two swapped each round), so that they see the same machine.
        const groups = twinGroups(running);
        for (const group of groups.map((_, i) => groups[(i + round - 1) % groups.length]!)) {
          for (let attempt = 0; ; attempt++) {
            const quietWait = await waitQuiet(0.25, s.quietWaitSec);
            const measured: Point[] = [];
            for (const c of alternate(group, round)) {
              const { r, meanBatch, cpuUsPerRequest, othersCores } = await measure(c, connections, common.durationSec);
              const sock = r.socketErrors;
              const point: Point = {
                server: c.name,
                connections,
                round,
                requestsPerSec: r.requestsPerSec,
                latencyMs: r.latency,
                requests: r.requests,
                non2xx: r.non2xx,
                socketErrors: sock.connect + sock.read + sock.write + sock.timeout,
                meanBatch,
                cpuUsPerRequest,
                othersCores,
                quietWait,
                wrkCommand: r.command,
              };
              measured.push(point);
              const bad = point.non2xx + point.socketErrors;
              log(
                `  round ${round} ${c.name.padEnd(nameWidth)} c=${String(connections).padEnd(3)} ${fmtInt(r.requestsPerSec).padStart(7)} req/s  p50 ${fmtMs(r.latency.p50)}  p99 ${fmtMs(r.latency.p99)} ms` +
                  (meanBatch !== undefined ? `  mean batch ${meanBatch.toFixed(1)}` : "") +
                  `  CPU ${cpuUsPerRequest.toFixed(0)} µs/req` +
                  (disturbedBy(othersCores) ? `  DISTURBED: others used ${othersCores.toFixed(2)} cores` : "") +
                  (bad > 0 ? `  ERRORS: non-2xx ${point.non2xx}, socket ${point.socketErrors}` : ""),
              );
            }
            if (!measured.some((p) => disturbedBy(p.othersCores)) || attempt >= s.retries) {
              points.push(...measured);
              break;
            }
            discarded.push(...measured);
            log(`  measuring again (${attempt + 1}/${s.retries})`);
          }
        }
      }
    }
    await hooks.afterSweep?.(servers);
  } finally {
    for (const server of servers.values()) await server.stop();
    await sink?.close();
  }
  const cells: Cell[] = [];
  for (const c of chosen) {
    for (const connections of s.connections) {
      const ps = points.filter((p) => p.server === c.name && p.connections === connections);
      if (ps.length === 0) continue;
      const med = (f: (p: Point) => number) => spread(ps.map(f)).median;
      const batches = ps.map((p) => p.meanBatch).filter((b): b is number => b !== undefined);
      cells.push({
        server: c.name,
        connections,
        requestsPerSec: spread(ps.map((p) => p.requestsPerSec)),
        p50Ms: med((p) => p.latencyMs.p50),
        p90Ms: med((p) => p.latencyMs.p90),
        p99Ms: med((p) => p.latencyMs.p99),
        non2xx: ps.reduce((a, p) => a + p.non2xx, 0),
        socketErrors: ps.reduce((a, p) => a + p.socketErrors, 0),
        meanBatch: batches.length > 0 ? spread(batches).median : undefined,
        cpuUsPerRequest: med((p) => p.cpuUsPerRequest),
      });
    }
  }
  const machine = machineInfo(wrkVersion());
  return {
    scenario,
    title,
    date: new Date().toISOString(),
    invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`,
    machine,
    git: gitState(root),
    ...(s.against !== undefined ? { against: s.against } : {}),
    versions: {
      ...nodeVersions(root),
      ...(chosen.some((c) => c.unavailable === undefined && c.spec?.runtime === "bun") ? { bun: findBun(root).runtime?.version ?? "missing" } : {}),
      wrk: machine.wrk,
      ...(chosen.some((c) => c.spec?.runtime === "python") ? peerVersions(root) : {}),
    },
    layout: { name: layout.name, servers: describeCpus(layout.server), wrk: describeCpus(layout.wrk), note: layout.note },
    settings: { connections: s.connections, rounds: common.rounds, durationSec: common.durationSec, warmupSec: common.warmupSec, quietWaitSec: s.quietWaitSec, retries: s.retries },
    contenders: chosen.map((c) => ({
      name: c.name,
      runtime: c.spec?.runtime ?? "node",
      config: c.config,
      unavailable: c.unavailable ?? failed.get(c.name),
      command: servers.get(c.name)?.command,
      path: c.path,
      body: c.body.length > 200 ? `${c.body.slice(0, 200)}… (${c.body.length} bytes)` : c.body,
    })),
    cells,
    points,
    discarded,
    extra: sink === undefined ? {} : { spanSink: { requests: sink.requests, bytes: sink.bytes } },
    headline: [],
  };
}

/** Median req/s of a server at a concurrency (NaN when not measured). */
export function rps(result: SweepResult, server: string, connections: number): number {
  return result.cells.find((c) => c.server === server && c.connections === connections)?.requestsPerSec.median ?? NaN;
}

/** Median p99 latency of a server at a concurrency, in ms (NaN when not measured). */
export function p99(result: SweepResult, server: string, connections: number): number {
  return result.cells.find((c) => c.server === server && c.connections === connections)?.p99Ms ?? NaN;
}

/** The highest median req/s a server reached over the sweep. */
export function peakRps(result: SweepResult, server: string): number {
  const xs = result.cells.filter((c) => c.server === server).map((c) => c.requestsPerSec.median);
  return xs.length > 0 ? Math.max(...xs) : NaN;
}

// A value just under its goal keeps a decimal, so that it does not print as the goal itself.
const fmtHeadline = (h: Headline) => {
  if (!Number.isFinite(h.value)) return "n/a";
  // Both units print two decimals of the ratio (85% is 0.85).
  const digits = h.value < h.goal && Number(h.value.toFixed(2)) >= h.goal ? 1 : 0;
  return h.unit === "%" ? `${(h.value * 100).toFixed(digits)}%` : `${h.value.toFixed(2 + digits)}×`;
};
const fmtGoal = (h: Headline) => (h.unit === "%" ? `≥ ${(h.goal * 100).toFixed(0)}%` : `≥ ${h.goal}×`);
const verdict = (h: Headline) => (Number.isFinite(h.value) ? (h.value >= h.goal ? "met" : "NOT met") : "not measured");

/** Rows of the headline table: what, value, goal, verdict, note. */
export function headlineRows(headline: readonly Headline[], scenario?: string): string[][] {
  return headline.map((h) => [...(scenario !== undefined ? [scenario] : []), h.what, fmtHeadline(h), fmtGoal(h), verdict(h), h.note ?? ""]);
}

export const HEADLINE_HEADERS = ["ratio", "value", "goal", "verdict", "note"];

/**
 * Writes <scenario>.json, .md, -throughput.svg and -latency.svg, and prints the table and the
 * headline. `sections` are extra Markdown paragraphs (limits, memory) placed before the table.
 */
export function report(ctx: ScenarioContext, result: SweepResult, sections: string[] = []): void {
  const comparison = comparisonReport(result);
  const traced = tracingReport(result);
  if (comparison !== undefined) result.headline = [...comparison.headline, ...result.headline];
  const names = result.contenders.filter((c) => c.unavailable === undefined).map((c) => c.name);
  const series = (f: (c: Cell) => [number, number]) =>
    names.map((name) => ({ name, points: result.cells.filter((c) => c.server === name).map(f) }));
  mkdirSync(ctx.resultsDir, { recursive: true });
  const plots = {
    throughput: `${result.scenario}-throughput.svg`,
    latency: `${result.scenario}-latency.svg`,
  };
  writeFileSync(
    join(ctx.resultsDir, plots.throughput),
    lineChart(series((c) => [c.connections, c.requestsPerSec.median]), { title: `${result.title}: throughput`, xLabel: "concurrent connections (log scale)", yLabel: "requests/s (median)", logX: true }),
  );
  writeFileSync(
    join(ctx.resultsDir, plots.latency),
    lineChart(series((c) => [c.requestsPerSec.median, c.p99Ms]), { title: `${result.title}: p99 latency against throughput`, xLabel: "requests/s (median)", yLabel: "p99 latency, ms" }),
  );
  const runtimeOf = (server: string) => runtimeLabel(result.contenders.find((c) => c.name === server)?.runtime ?? "node", result.versions);
  const headers = ["server", "runtime", "conns", "req/s (median)", "req/s range", "p50 ms", "p90 ms", "p99 ms", "mean batch", "CPU µs/req", "non-2xx", "socket errors", "note"];
  const align = ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l"] as const;
  const rows = result.cells.map((c) => [
    c.server,
    runtimeOf(c.server),
    String(c.connections),
    fmtInt(c.requestsPerSec.median),
    `${fmtInt(c.requestsPerSec.min)}–${fmtInt(c.requestsPerSec.max)}`,
    fmtMs(c.p50Ms),
    fmtMs(c.p90Ms),
    fmtMs(c.p99Ms),
    c.meanBatch === undefined ? "" : c.meanBatch.toFixed(1),
    Number.isFinite(c.cpuUsPerRequest) ? c.cpuUsPerRequest.toFixed(0) : "",
    String(c.non2xx),
    String(c.socketErrors),
    "",
  ]);
  for (const c of result.contenders) if (c.unavailable !== undefined) rows.push([c.name, runtimeOf(c.name), "–", "n/a", "", "", "", "", "", "", "", "", `not measured: ${c.unavailable}`]);
  const s = result.settings;
  const md = [
    `# ${result.title}`,
    "",
    `Generated by \`${result.invocation}\` on ${result.date}. See docs/benchmarks.md for how to read it.`,
    "",
    `- Code: commit ${result.git.commit.slice(0, 12)}${result.git.srcDirty ? " with uncommitted changes in src/" : ""}`,
    `- Machine: ${result.machine.nproc} CPUs, ${result.machine.cpuModel}, ${result.machine.kernel}`,
    `- Versions: ${Object.entries(result.versions).map(([k, v]) => `${k} ${v}`).join(", ")}`,
    `- CPU layout **${result.layout.name}**: servers on ${result.layout.servers}, wrk on ${result.layout.wrk} (${result.layout.note})`,
    `- Load: wrk, 1 thread, connections ${s.connections.join(", ")}; ${s.rounds} rounds of ${s.durationSec} s per point after a ${s.warmupSec} s warm-up per server; servers interleaved (order rotated each round); medians over rounds; before each point the harness waited up to ${s.quietWaitSec} s for a quiet machine${s.retries > 0 ? ` and measured a point again, up to ${s.retries} times, when other processes used more than ${DISTURBED} cores during it` : ""}`,
    "",
    "## Servers",
    "",
    ...result.contenders.map((c) => `- **${c.name}** (${runtimeOf(c.name)}): ${c.config}${c.unavailable !== undefined ? ` — **not measured: ${c.unavailable}**` : ""}; \`POST ${c.path}\` with \`${c.body}\`${c.command !== undefined ? `; started as \`${c.command}\`` : ""}`),
    "",
    ...sections,
    "## Results",
    "",
    markdownTable(headers, rows, align),
    "",
    `![throughput](${plots.throughput}) ![p99 latency](${plots.latency})`,
    "",
    ...(comparison?.markdown ?? []),
    ...(traced?.markdown ?? []),
    "## Headline",
    "",
    markdownTable(HEADLINE_HEADERS, headlineRows(result.headline)),
    "",
  ].join("\n");
  const written = writeResults(ctx.resultsDir, result.scenario, result, md);
  process.stdout.write("\n" + textTable(headers, rows, align) + "\n\n" + (comparison !== undefined ? `before and after:\n\n${comparison.text}\n\n` : "") + (traced !== undefined ? `tracing off and on:\n\n${traced.text}\n\n` : "") + textTable(HEADLINE_HEADERS, headlineRows(result.headline)) + "\n\n");
  process.stdout.write(`results: ${[written.json, written.md, join(ctx.resultsDir, plots.throughput), join(ctx.resultsDir, plots.latency)].map((f) => relative(process.cwd(), f)).join(", ")}\n`);
}
