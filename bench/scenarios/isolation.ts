/**
 * Isolation benchmark: the calculate-exp workload with its workers as child processes
 * (`isolation: "process"`) beside worker threads (the default), same num and same load; then how
 * long a stage takes to serve again after its worker is killed.
 *
 * Throughput: after a warm-up, wrk alternates between the two servers for N rounds at C
 * connections (medians over rounds). Recovery: a process worker gets `kill -9`; a thread worker
 * (which cannot be killed from outside) gets a request that makes it exit. From then on a cheap
 * request is sent every few milliseconds, and the time until the first 200 is the recovery time.
 * The replacement's own init() time is read from its gauge and reported beside it.
 */
import { relative } from "node:path";
import { gitState, machineBusy, machineInfo, waitQuiet, type MachineInfo } from "../lib/machine.js";
import { alternate, describePoint, DISTURBED, measureOnce, measurePoint, quietHelp, quietOptions, quietSettings, summarise, SUMMARY_ALIGN, SUMMARY_HEADERS, summaryCells, wholeNumber, type Measured, type QuietSettings, type Summary } from "../lib/measure.js";
import { descendants } from "../lib/proctree.js";
import { metricValue, scrape } from "../../src/bench/prometheus-text.js";
import { fmtMs, markdownTable, textTable, writeResults, targetsAndCommands, reportHeader } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { spread, type Spread } from "../lib/stats.js";
import { requireWrk, wrkVersion, type WrkOptions } from "../lib/wrk.js";

/** Sized so that the default run takes about 2 minutes. */
export const defaults = { duration: 8, rounds: 3, warmup: 3 };

const BODY = '{"x": 2}';
const ISOLATIONS = ["thread", "process"] as const;
type Isolation = (typeof ISOLATIONS)[number];
/** Give up on a recovery after this long. */
const RECOVERY_TIMEOUT_MS = 30_000;

interface Point extends Measured {
  isolation: Isolation;
  round: number;
}

interface Recovery {
  isolation: Isolation;
  /** How the worker was killed. */
  how: string;
  /** From the kill to the first 200, ms. */
  recoveryMs: number;
  /** Requests sent while the stage recovered, and how they were answered, by status. */
  polls: number;
  statuses: Record<string, number>;
  /** The replacement's init() time, ms, from its gauge. */
  initMs: number;
  /** shoal_stage_worker_restarts_total went up by this much. */
  restarts: number;
  /** Seconds spent waiting for the machine to be quiet before the kill, and the load then. */
  quietWait: { waitedSec: number; busy: number } | undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(url: string, body: string): Promise<number> {
  try {
    const res = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(RECOVERY_TIMEOUT_MS) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function waitReady(server: RunningServer): Promise<void> {
  const deadline = Date.now() + RECOVERY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const res = await fetch(`${server.url}/readyz`).catch(() => undefined);
    if (res?.status === 200) return;
    await sleep(20);
  }
  throw new Error(`${server.name} is not ready ${RECOVERY_TIMEOUT_MS} ms after a kill:\n${server.output()}`);
}

/** Kills the stage's worker, then polls every `pollMs` until a request is answered 200. */
async function recover(server: RunningServer, isolation: Isolation, pollMs: number, quietWait: Recovery["quietWait"]): Promise<Recovery> {
  const url = `${server.url}/inference`;
  const before = await scrape(server.url);
  const statuses: Record<string, number> = {};
  const answered: Promise<void>[] = [];
  let how: string;
  let t0: number;
  if (isolation === "process") {
    const workers = descendants(server.pid);
    if (workers.length === 0) throw new Error(`${server.name} has no worker process to kill`);
    how = "kill -9 of the worker process";
    t0 = performance.now();
    process.kill(workers[0]!, "SIGKILL");
  } else {
    how = 'a request {"exit": true} that ends the worker thread';
    t0 = performance.now();
    answered.push(post(url, '{"exit": true}').then((s) => void (statuses[`exit request ${s}`] = 1)));
  }
  let firstOk: number | undefined;
  let polls = 0;
  while (firstOk === undefined && performance.now() - t0 < RECOVERY_TIMEOUT_MS) {
    polls++;
    answered.push(
      post(url, BODY).then((status) => {
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status === 200) firstOk ??= performance.now();
      }),
    );
    await sleep(pollMs);
  }
  await Promise.all(answered);
  if (firstOk === undefined) throw new Error(`${server.name}: no 200 within ${RECOVERY_TIMEOUT_MS} ms of the kill:\n${server.output()}`);
  await waitReady(server);
  // Worker metrics reach /metrics every 250 ms.
  await sleep(400);
  const after = await scrape(server.url);
  const restarts = metricValue(after, "shoal_stage_worker_restarts_total") - metricValue(before, "shoal_stage_worker_restarts_total");
  return { isolation, how, recoveryMs: firstOk - t0, polls, statuses, initMs: metricValue(after, "bench_worker_init_seconds", { worker: "1" }) * 1000, restarts, quietWait };
}

interface IsolationData {
  scenario: "isolation";
  date: string;
  invocation: string;
  machine: MachineInfo;
  git: { commit: string; srcDirty: boolean };
  busyAtStart: number;
  settings: QuietSettings & { num: number; connections: number; rounds: number; durationSec: number; warmupSec: number; kills: number; pollMs: number; initMsAsked: number; body: string };
  commands: Record<string, string[]>;
  summary: Record<Isolation, Summary & { recoveryMs: Spread; initMs: Spread }>;
  targets: { recoveryUnderMsPlusInit: number };
  points: Point[];
  discarded: Point[];
  recoveries: Recovery[];
}

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { common, values, root, log } = ctx;
  const num = wholeNumber("--num", (values.num as string | undefined) ?? process.env.BENCH_NUM, 1);
  const connections = wholeNumber("--connections", values.connections as string | undefined, 64);
  const kills = wholeNumber("--kills", values.kills as string | undefined, 5);
  const pollMs = wholeNumber("--poll-ms", values["poll-ms"] as string | undefined, 5);
  const initMs = Number((values["init-ms"] as string | undefined) ?? process.env.BENCH_INIT_MS ?? 0);
  if (!Number.isFinite(initMs) || initMs < 0) throw new Error("--init-ms must be a number of milliseconds >= 0");
  const quiet = quietSettings(values);
  const machine = machineInfo(wrkVersion());
  const git = gitState(root);
  log(`isolation: calculate-exp, num ${num}, threads vs processes, ${connections} connections, ${common.rounds} rounds of ${common.durationSec} s; then ${kills} kills each`);
  log(`commit ${git.commit.slice(0, 12)}${git.srcDirty ? " (src/ has uncommitted changes)" : ""}`);
  const busyAtStart = Math.round((await machineBusy(1000)) * 100) / 100;
  log(`other processes are using ${busyAtStart} cores`);

  const probe = { path: "/inference", body: BODY };
  const servers = {} as Record<Isolation, RunningServer>;
  const commands: Record<string, string[]> = {};
  const points: Point[] = [];
  const discarded: Point[] = [];
  const recoveries: Recovery[] = [];
  try {
    for (const isolation of ISOLATIONS) {
      servers[isolation] = await startServer({
        name: `shoal-${isolation}`,
        script: "bench/servers/shoal-exp.ts",
        args: ["--num", String(num), "--isolation", isolation, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
        port: await freePort(),
        cwd: root,
        env: { BENCH_INIT_MS: String(initMs) },
        probe,
      });
      commands[isolation] = [servers[isolation].command];
    }
    const wrkOptions = (isolation: Isolation, seconds: number): WrkOptions => ({
      url: `${servers[isolation].url}/inference`,
      connections,
      durationSec: seconds,
      script: "bench/lua/post-json.lua",
      cwd: root,
      env: { WRK_BODY: BODY },
    });
    for (const isolation of ISOLATIONS) {
      log(`  warm-up ${isolation} (${common.warmupSec} s)`);
      await measureOnce(servers[isolation].pid, wrkOptions(isolation, common.warmupSec));
    }
    for (let round = 1; round <= common.rounds; round++) {
      for (const isolation of alternate(ISOLATIONS, round)) {
        const label = `round ${round} ${isolation.padEnd(7)}`;
        const m = await measurePoint(servers[isolation].pid, wrkOptions(isolation, common.durationSec), quiet, log, label);
        points.push({ isolation, round, ...m.point });
        discarded.push(...m.discarded.map((d) => ({ isolation, round, ...d })));
        commands[`wrk c=${connections}`] ??= [m.point.wrkCommand];
        log(describePoint(label, m.point));
      }
    }
    for (let k = 1; k <= kills; k++) {
      for (const isolation of alternate(ISOLATIONS, k)) {
        await sleep(500);
        const quietWait = quiet.quietWaitSec > 0 ? await waitQuiet(DISTURBED, quiet.quietWaitSec) : undefined;
        const r = await recover(servers[isolation], isolation, pollMs, quietWait);
        recoveries.push(r);
        log(`  kill ${k} ${isolation.padEnd(7)} serving again after ${fmtMs(r.recoveryMs)} ms (init() ${fmtMs(r.initMs)} ms; ${r.polls} polls: ${JSON.stringify(r.statuses)}; restarts +${r.restarts})`);
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.stop();
  }

  const summary = Object.fromEntries(
    ISOLATIONS.map((iso) => {
      const rs = recoveries.filter((r) => r.isolation === iso);
      return [iso, { ...summarise(points.filter((p) => p.isolation === iso)), recoveryMs: spread(rs.map((r) => r.recoveryMs)), initMs: spread(rs.map((r) => r.initMs)) }];
    }),
  ) as IsolationData["summary"];
  const data: IsolationData = {
    scenario: "isolation",
    date: new Date().toISOString(),
    invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`,
    machine,
    git,
    busyAtStart,
    settings: { ...quiet, num, connections, rounds: common.rounds, durationSec: common.durationSec, warmupSec: common.warmupSec, kills, pollMs, initMsAsked: initMs, body: BODY },
    commands,
    summary,
    targets: { recoveryUnderMsPlusInit: 1000 },
    points,
    discarded,
    recoveries,
  };
  const written = writeResults(ctx.resultsDir, "isolation", data, markdown(data));
  process.stdout.write("\n" + headline(data) + "\n\n");
  process.stdout.write(`results: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}\n`);
}

const HEADERS = ["isolation", ...SUMMARY_HEADERS, "recovery ms (median)", "recovery range", "init() ms"];
const ALIGN = ["l", ...SUMMARY_ALIGN, "r", "r", "r"] as const;

function rows(data: IsolationData): string[][] {
  return ISOLATIONS.map((iso) => {
    const s = data.summary[iso];
    return [iso, ...summaryCells(s), fmtMs(s.recoveryMs.median), `${fmtMs(s.recoveryMs.min)}–${fmtMs(s.recoveryMs.max)}`, fmtMs(s.initMs.median)];
  });
}

function verdicts(data: IsolationData): string[] {
  const { thread, process: proc } = data.summary;
  const ratio = proc.requestsPerSec.median / thread.requestsPerSec.median;
  return [
    `process/thread req/s at ${data.settings.connections} connections = ${ratio.toFixed(2)}`,
    ...ISOLATIONS.map((iso) => {
      const s = data.summary[iso];
      const limit = data.targets.recoveryUnderMsPlusInit + s.initMs.median;
      return `${iso}: serving again ${fmtMs(s.recoveryMs.median)} ms after a kill (worst ${fmtMs(s.recoveryMs.max)} ms of ${s.recoveryMs.n}; target < 1 s + init() = ${fmtMs(limit)} ms: ${s.recoveryMs.max < limit ? "met" : "NOT met"})`;
    }),
  ];
}

function headline(data: IsolationData): string {
  return [textTable(HEADERS, rows(data), ALIGN), "", ...verdicts(data)].join("\n");
}

function markdown(data: IsolationData): string {
  const { settings: s } = data;
  return [
    ...reportHeader("Isolation benchmark: worker processes beside worker threads", data),
    `- Shoal: bench/servers/shoal-exp.ts (calculate-exp), num ${s.num}, maxBatchSize 1, \`--log-level warn\`, unpinned; init() asked to take ${s.initMsAsked} ms`,
    `- Load: wrk, 1 thread, POST /inference \`${s.body}\`, ${s.connections} connections, ${s.rounds} rounds of ${s.durationSec} s after a ${s.warmupSec} s warm-up each, servers alternating; medians over rounds`,
    `- Recovery: ${s.kills} kills per server (after waiting for a quiet machine, as for a point); after each kill a request every ${s.pollMs} ms until the first 200`,
    s.quietWaitSec > 0 ? `- Waited up to ${s.quietWaitSec} s for a quiet machine before each point; disturbed points measured again up to ${s.retries} times` : "- No waiting for a quiet machine",
    "",
    "## Results",
    "",
    markdownTable(HEADERS, rows(data), ALIGN),
    "",
    "- **server CPU**: cores used by the server, its worker threads and its worker processes (median over rounds).",
    "- **recovery**: from the kill to the first 200 answer; **init() ms**: the replacement's init(), from its gauge.",
    "",
    ...targetsAndCommands(verdicts(data), data.commands),
  ].join("\n");
}

export const scenario: Scenario = {
  name: "isolation",
  summary: "calculate-exp with worker processes vs worker threads (req/s, p50/p99), and the time from a killed worker to its stage serving again.",
  options: {
    num: { type: "string" },
    connections: { type: "string" },
    kills: { type: "string" },
    "poll-ms": { type: "string" },
    "init-ms": { type: "string" },
    ...quietOptions,
  },
  help: {
    "num <n>": "workers in the stage (BENCH_NUM; default 1)",
    "connections <n>": "wrk connections (default 64)",
    "kills <n>": "kills per server for the recovery time (default 5)",
    "poll-ms <ms>": "interval of the requests sent after a kill (default 5)",
    "init-ms <ms>": "make each worker's init() take this long (BENCH_INIT_MS; default 0)",
    ...quietHelp,
  },
  run,
};
