/**
 * Core benchmark: what Shoal's HTTP thread + one worker thread costs against doing the same JSON
 * work inline in a plain node:http server.
 *
 * For each CPU layout, both servers run side by side (idle while the other is measured); after a
 * warm-up, wrk alternates between them for N rounds at C connections (throughput) and at 1
 * connection (latency). Medians over rounds are reported, with ranges.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { allowedCpus, describeCpus, gitState, hasTaskset, machineBusy, machineInfo, type CpuSet, type MachineInfo } from "../lib/machine.js";
import { alternate, describePoint, DISTURBED, measureOnce, measurePoint, quietHelp, quietOptions, quietSettings, wholeNumber, type Measured } from "../lib/measure.js";
import { fmtInt, fmtMs, markdownTable, textTable, writeResults, targetsAndCommands } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { spread, type Spread } from "../lib/stats.js";
import { requireWrk, wrkVersion, type WrkOptions } from "../lib/wrk.js";

/** Defaults sized so that the default run (2 layouts) takes about 3 minutes. */
export const defaults = { duration: 8, rounds: 3, warmup: 3 };

const BODY = '{"x": 2}';
const EXPECTED = Math.exp(2);
const SERVERS = ["shoal", "plain"] as const;
type ServerName = (typeof SERVERS)[number];

export interface Layout {
  name: string;
  server: CpuSet | undefined;
  wrk: CpuSet | undefined;
  note: string;
}

/** The CPU layouts this machine allows, by name. */
export function layouts(): Map<string, Layout | string> {
  const cpus = allowedCpus();
  const out = new Map<string, Layout | string>();
  const taskset = hasTaskset();
  if (!taskset) {
    out.set("pinned", "taskset is not available");
    out.set("pinned-2core", "taskset is not available");
  } else {
    out.set(
      "pinned",
      cpus.length >= 2
        ? { name: "pinned", server: [cpus[0]!], wrk: [cpus[1]!], note: "server process (all its threads) on one core, wrk on another" }
        : `needs 2 CPUs, this process may use ${cpus.length}`,
    );
    out.set(
      "pinned-2core",
      cpus.length >= 3
        ? { name: "pinned-2core", server: [cpus[0]!, cpus[1]!], wrk: [cpus[2]!], note: "server on two cores (room for Shoal's worker thread), wrk on a third" }
        : `needs 3 CPUs, this process may use ${cpus.length}`,
    );
  }
  out.set("unpinned", { name: "unpinned", server: undefined, wrk: undefined, note: "no pinning: server threads and wrk share all cores" });
  return out;
}

interface Point extends Measured {
  layout: string;
  server: ServerName;
  round: number;
}

interface Cell {
  layout: string;
  server: ServerName;
  connections: number;
  requestsPerSec: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  avgMs: Spread;
  non2xx: number;
  socketErrors: number;
  cpuTotal: number;
  cpuMain: number;
  cpuBusiestOther: number;
  cpuWrk: number;
  /** Server CPU time per request, µs (median over rounds). */
  cpuUsPerRequest: number;
  /** Rounds during which other processes used more than DISTURBED cores. */
  disturbed: number;
}

interface LayoutSummary {
  layout: string;
  serverCpus: string;
  wrkCpus: string;
  note: string;
  /** Median Shoal req/s over median plain req/s at the throughput point. */
  ratio: number;
  /** Shoal/plain req/s per round (same round, back to back). */
  ratioPerRound: number[];
  /** Median p50 of Shoal minus median p50 of plain at 1 connection, ms. */
  addedP50Ms: number;
  addedAvgMs: number;
  cells: Cell[];
}

function parseList(value: string | undefined, fallback: string[]): string[] {
  return value === undefined ? fallback : value.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
}

async function run(ctx: ScenarioContext): Promise<void> {
  if (ctx.values.render === true) {
    render(ctx);
    return;
  }
  requireWrk();
  const { common, values, root, log } = ctx;
  const num = wholeNumber("--num", (values.num as string | undefined) ?? process.env.BENCH_NUM, 1);
  const connections = wholeNumber("--connections", values.connections as string | undefined, 64);
  const quiet = quietSettings(values);
  const { quietWaitSec, retries } = quiet;
  const latencySec = Number((values["latency-duration"] as string | undefined) ?? process.env.BENCH_LATENCY_DURATION ?? Math.max(2, common.durationSec / 2));
  if (!Number.isFinite(latencySec) || latencySec <= 0) throw new Error("--latency-duration must be a positive number");
  const available = layouts();
  const wanted = parseList((values.layouts as string | undefined) ?? process.env.BENCH_LAYOUTS, ["pinned", "unpinned"]);
  const chosen: Layout[] = [];
  const skipped: Record<string, string> = {};
  for (const name of wanted) {
    const l = available.get(name);
    if (l === undefined) throw new Error(`unknown layout '${name}'; known: ${[...available.keys()].join(", ")}`);
    if (typeof l === "string") {
      skipped[name] = l;
      log(`layout ${name} skipped: ${l}`);
    } else chosen.push(l);
  }
  if (chosen.length === 0) throw new Error("no layout can run on this machine");

  const wrk = wrkVersion();
  const machine = machineInfo(wrk);
  const git = gitState(root);
  const script = join("bench", "lua", "post-json.lua");
  const connectionPoints = [connections, 1];
  const points: Point[] = [];
  /** Disturbed attempts that were measured again (with --retries). */
  const discarded: Point[] = [];
  const commands: Record<string, string[]> = {};
  const estimate = chosen.length * (common.warmupSec * 2 + common.rounds * 2 * (common.durationSec + latencySec) + 8);
  log(
    `core: Shoal (num ${num}) vs node:http, ${connections} and 1 connections, ${common.rounds} rounds of ${common.durationSec} s (${latencySec} s at 1 connection), ` +
      `warm-up ${common.warmupSec} s, layouts ${chosen.map((l) => l.name).join(", ")}; about ${Math.round(estimate)} s`,
  );
  log(`commit ${git.commit.slice(0, 12)}${git.srcDirty ? " (src/ has uncommitted changes)" : ""}`);
  log(`machine: ${machine.nproc} CPUs (${machine.cpuModel}), Node ${machine.node}, ${wrk}`);
  const busyAtStart = Math.round((await machineBusy(1000)) * 100) / 100;
  log(
    `other processes are using ${busyAtStart} cores` +
      (busyAtStart > DISTURBED ? ` (more than ${DISTURBED}: expect noisy figures; --quiet-wait <s> waits for a quiet machine before each point)` : ""),
  );

  for (const layout of chosen) {
    log(`layout ${layout.name}: server on ${describeCpus(layout.server)}, wrk on ${describeCpus(layout.wrk)} (${layout.note})`);
    const ports = { shoal: await freePort(), plain: await freePort() };
    const probe = {
      path: "/inference",
      body: BODY,
      check: (text: string) => {
        const y = (JSON.parse(text) as { y?: number }).y;
        return typeof y === "number" && Math.abs(y - EXPECTED) < 1e-9 ? undefined : `expected {"y": ${EXPECTED}}, got ${text}`;
      },
    };
    const servers: Record<ServerName, RunningServer> = {
      shoal: await startServer({
        name: "shoal",
        script: "bench/servers/shoal-exp.ts",
        args: ["--num", String(num), "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
        port: ports.shoal,
        cwd: root,
        cpus: layout.server,
        probe,
      }),
      plain: await startServer({
        name: "plain",
        script: "bench/servers/plain-exp.ts",
        args: ["--port", "{port}", "--address", "127.0.0.1"],
        port: ports.plain,
        cwd: root,
        cpus: layout.server,
        probe,
      }),
    };
    commands[layout.name] = [servers.shoal.command, servers.plain.command];
    try {
      const wrkOptions = (server: ServerName, conns: number, seconds: number): WrkOptions => ({
        url: `${servers[server].url}/inference`,
        connections: conns,
        durationSec: seconds,
        script,
        cwd: root,
        env: { WRK_BODY: BODY },
        cpus: layout.wrk,
      });
      for (const server of SERVERS) {
        log(`  warm-up ${server} (${common.warmupSec} s at ${connections} connections)`);
        const warm = await measureOnce(servers[server].pid, wrkOptions(server, connections, common.warmupSec));
        if (warm.non2xx > 0) log(`  warning: ${warm.non2xx} non-2xx answers during the warm-up of ${server}`);
      }
      for (let round = 1; round <= common.rounds; round++) {
        for (const conns of connectionPoints) {
          for (const server of alternate(SERVERS, round)) {
            const seconds = conns === 1 ? latencySec : common.durationSec;
            const label = `round ${round} ${server.padEnd(5)} c=${String(conns).padEnd(3)}`;
            const m = await measurePoint(servers[server].pid, wrkOptions(server, conns, seconds), quiet, log, label);
            const point: Point = { layout: layout.name, server, round, ...m.point };
            discarded.push(...m.discarded.map((d) => ({ layout: layout.name, server, round, ...d })));
            commands[`wrk ${layout.name} c=${conns}`] ??= [point.wrkCommand];
            points.push(point);
            log(describePoint(label, point));
          }
        }
      }
    } finally {
      await servers.shoal.stop();
      await servers.plain.stop();
    }
  }

  const summaries = chosen.map((l) => summarise(l, points, connections));
  const data: CoreData = {
    scenario: "core",
    date: new Date().toISOString(),
    invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`,
    machine,
    git,
    busyAtStart,
    settings: { shoalWorkers: num, quietWaitSec, retries, disturbedAboveCores: DISTURBED, connections, rounds: common.rounds, durationSec: common.durationSec, latencyDurationSec: latencySec, warmupSec: common.warmupSec, body: BODY },
    targets: { ratioAtConnections: 0.5, addedP50MsAtOneConnection: 1 },
    layouts: chosen,
    skippedLayouts: skipped,
    commands,
    summary: summaries,
    points,
    discarded,
  };
  const written = writeResults(ctx.resultsDir, "core", data, markdown(data));
  process.stdout.write("\n" + headline(summaries, connections) + "\n\n");
  process.stdout.write(`results: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}\n`);
}

/** Everything a run records in core.json. */
interface CoreData {
  scenario: "core";
  date: string;
  invocation: string;
  machine: MachineInfo;
  git: { commit: string; srcDirty: boolean };
  busyAtStart: number;
  settings: {
    shoalWorkers: number;
    quietWaitSec: number;
    retries: number;
    disturbedAboveCores: number;
    connections: number;
    rounds: number;
    durationSec: number;
    latencyDurationSec: number;
    warmupSec: number;
    body: string;
  };
  targets: { ratioAtConnections: number; addedP50MsAtOneConnection: number };
  layouts: Layout[];
  skippedLayouts: Record<string, string>;
  commands: Record<string, string[]>;
  summary: LayoutSummary[];
  points: Point[];
  discarded: Point[];
}

// --render: rewrites core.md and the summary in core.json from the points in core.json, without measuring.
function render(ctx: ScenarioContext): void {
  const file = join(ctx.resultsDir, "core.json");
  if (!existsSync(file)) throw new Error(`${file} does not exist: run the benchmark first`);
  const data = JSON.parse(readFileSync(file, "utf8")) as CoreData;
  data.summary = data.layouts.map((l) => summarise(l, data.points, data.settings.connections));
  const written = writeResults(ctx.resultsDir, "core", data, markdown(data));
  process.stdout.write(headline(data.summary, data.settings.connections) + "\n\n");
  process.stdout.write(`rewritten from the recorded points: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}\n`);
}

function summarise(layout: Layout, points: Point[], connections: number): LayoutSummary {
  const cells: Cell[] = [];
  for (const conns of [connections, 1]) {
    for (const server of SERVERS) {
      const ps = points.filter((p) => p.layout === layout.name && p.server === server && p.connections === conns);
      const med = (f: (p: Point) => number) => spread(ps.map(f)).median;
      cells.push({
        layout: layout.name,
        server,
        connections: conns,
        requestsPerSec: spread(ps.map((p) => p.requestsPerSec)),
        p50Ms: spread(ps.map((p) => p.latencyMs.p50)),
        p99Ms: spread(ps.map((p) => p.latencyMs.p99)),
        avgMs: spread(ps.map((p) => p.latencyMs.avg)),
        non2xx: ps.reduce((a, p) => a + p.non2xx, 0),
        socketErrors: ps.reduce((a, p) => a + p.socketErrors.connect + p.socketErrors.read + p.socketErrors.write + p.socketErrors.timeout, 0),
        cpuTotal: med((p) => p.load.server.total),
        cpuMain: med((p) => p.load.server.main),
        cpuBusiestOther: med((p) => p.load.server.busiestOther),
        cpuWrk: med((p) => p.load.wrk),
        cpuUsPerRequest: med((p) => (p.load.server.total / p.requestsPerSec) * 1e6),
        disturbed: ps.filter((p) => p.disturbed).length,
      });
    }
  }
  const cell = (server: ServerName, conns: number) => cells.find((c) => c.server === server && c.connections === conns)!;
  const rounds = [...new Set(points.filter((p) => p.layout === layout.name).map((p) => p.round))];
  const ratioPerRound = rounds.map((round) => {
    const at = (server: ServerName) => points.find((p) => p.layout === layout.name && p.server === server && p.connections === connections && p.round === round)?.requestsPerSec ?? NaN;
    return Math.round((at("shoal") / at("plain")) * 1000) / 1000;
  });
  return {
    layout: layout.name,
    serverCpus: describeCpus(layout.server),
    wrkCpus: describeCpus(layout.wrk),
    note: layout.note,
    ratio: cell("shoal", connections).requestsPerSec.median / cell("plain", connections).requestsPerSec.median,
    ratioPerRound,
    addedP50Ms: cell("shoal", 1).p50Ms.median - cell("plain", 1).p50Ms.median,
    addedAvgMs: cell("shoal", 1).avgMs.median - cell("plain", 1).avgMs.median,
    cells,
  };
}

function rows(summaries: LayoutSummary[]): string[][] {
  const out: string[][] = [];
  for (const s of summaries) {
    for (const c of s.cells) {
      const r = c.requestsPerSec;
      out.push([
        s.layout,
        c.server,
        String(c.connections),
        fmtInt(r.median),
        `${fmtInt(r.min)}–${fmtInt(r.max)}`,
        fmtMs(c.p50Ms.median),
        fmtMs(c.p99Ms.median),
        String(c.non2xx + c.socketErrors),
        `${c.cpuTotal.toFixed(2)} (${c.cpuMain.toFixed(2)} + ${c.cpuBusiestOther.toFixed(2)})`,
        c.cpuUsPerRequest.toFixed(0),
        c.cpuWrk.toFixed(2),
        `${c.disturbed}/${c.requestsPerSec.n}`,
      ]);
    }
  }
  return out;
}

const HEADERS = ["layout", "server", "conns", "req/s (median)", "req/s range", "p50 ms", "p99 ms", "errors", "server CPU (main + next thread)", "CPU µs/req", "wrk CPU", "disturbed"];
const ALIGN = ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"] as const;

function verdicts(summaries: LayoutSummary[], connections: number): string[] {
  return summaries.map((s) => {
    const ratioOk = s.ratio >= 0.5;
    const latOk = s.addedP50Ms < 1;
    const disturbed = s.cells.reduce((n, c) => n + c.disturbed, 0);
    const measured = s.cells.reduce((n, c) => n + c.requestsPerSec.n, 0);
    return (
      (disturbed > 0 ? `[${disturbed} of ${measured} points disturbed by other processes] ` : "") +
      `${s.layout}: Shoal/plain at ${connections} connections = ${s.ratio.toFixed(2)} (per round ${s.ratioPerRound.map((x) => x.toFixed(2)).join(", ")}; target >= 0.5: ${ratioOk ? "met" : "NOT met"}); ` +
      `added p50 at 1 connection = ${fmtMs(s.addedP50Ms)} ms (mean ${fmtMs(s.addedAvgMs)} ms; target < 1 ms: ${latOk ? "met" : "NOT met"})`
    );
  });
}

function headline(summaries: LayoutSummary[], connections: number): string {
  return [textTable(HEADERS, rows(summaries), ALIGN), "", ...verdicts(summaries, connections)].join("\n");
}

function markdown(data: CoreData): string {
  const { date, git, machine, settings, summary: summaries, commands, skippedLayouts: skipped } = data;
  const connections = settings.connections;
  const lines = [
    "# Core benchmark: Shoal (1 stage) vs plain node:http",
    "",
    `Generated by \`${data.invocation ?? "npm run bench -- core"}\` on ${date}. See docs/benchmarks.md for how to read it.`,
    "",
    `- Code: commit ${git.commit.slice(0, 12)}${git.srcDirty ? " with uncommitted changes in src/" : ""} (dist/ built from it)`,
    `- Machine: ${machine.nproc} CPUs (\`nproc\`), ${machine.cpuModel}, ${machine.kernel}; Node ${machine.node}; ${machine.wrk}`,
    `- Load: wrk, 1 thread, POST /inference with \`${settings.body}\`; ${settings.connections} connections for ${settings.durationSec} s and 1 connection for ${settings.latencyDurationSec} s per point`,
    `- ${settings.rounds} rounds per point after a ${settings.warmupSec} s warm-up per server, servers alternating (order swapped each round); medians over rounds, with the range of req/s`,
    `- Shoal: CalculateExp worker, num ${settings.shoalWorkers}, maxBatchSize 1, \`--log-level warn\``,
    settings.quietWaitSec > 0
      ? `- Before each point the harness waited up to ${settings.quietWaitSec} s for other processes to use less than ${settings.disturbedAboveCores} cores`
      : "- No waiting for a quiet machine (`--quiet-wait 0`)",
    settings.retries > 0
      ? `- A point during which other processes used more than ${settings.disturbedAboveCores} cores was measured again, up to ${settings.retries} times (discarded attempts are in core.json under \`discarded\`)`
      : "- Disturbed points were kept (`--retries 0`)",
    "",
    "## Layouts",
    "",
    ...summaries.map((s) => `- **${s.layout}**: server on ${s.serverCpus}, wrk on ${s.wrkCpus} (${s.note})`),
    ...Object.entries(skipped).map(([name, why]) => `- ${name}: skipped (${why})`),
    "",
    "## Results",
    "",
    markdownTable(HEADERS, rows(summaries), ALIGN),
    "",
    "- **errors**: non-2xx answers and socket errors, over all rounds.",
    "- **server CPU**: the server process's CPU time per second of wall time (median over rounds): all threads, then",
    "  the main thread + the busiest other thread (for Shoal, its worker thread). 1.00 is one core busy all the time.",
    "- **CPU µs/req**: server CPU time per request (median over rounds). **wrk CPU**: the same for wrk.",
    `- **disturbed**: rounds during which other processes used more than ${DISTURBED} cores (busy CPU time not`,
    "  explained by the servers, wrk or the harness).",
    "",
    ...targetsAndCommands(verdicts(summaries, connections), commands),
  ];
  return lines.join("\n");
}

export const scenario: Scenario = {
  name: "core",
  summary: "Shoal calculate-exp with one worker vs the same work inline in node:http: req/s, p50/p99, ratio and added latency.",
  options: {
    num: { type: "string" },
    connections: { type: "string" },
    "latency-duration": { type: "string" },
    layouts: { type: "string" },
    ...quietOptions,
    render: { type: "boolean" },
  },
  help: {
    "num <n>": "Shoal workers in the stage (BENCH_NUM; default 1)",
    "connections <n>": "connections of the throughput point (default 64); a 1-connection point is always measured",
    "latency-duration <s>": "seconds per 1-connection point (BENCH_LATENCY_DURATION; default half of --duration)",
    ...quietHelp,
    render: "rewrite core.md (and the summary in core.json) from the points in core.json, without measuring",
    "layouts <list>": "CPU layouts, comma-separated: pinned, pinned-2core (needs 3 CPUs), unpinned (BENCH_LAYOUTS; default pinned,unpinned)",
  },
  run,
};
