/**
 * overload: a compute-bound stage (bench/servers/overload-server.ts: the CPU spun for 10 ms + 2 ms
 * an item of each batch of up to 16, on one worker) offered 1.5× and 3× its capacity, open loop
 * (requests sent at a fixed rate whatever the answers), with two priority classes (10 % high,
 * asking level 1 and a deadline of 4× a full batch's time; the rest level 2 and --timeout) and two
 * tenants (a sends two thirds, b one third). The same server three ways: `fifo` (one first-in,
 * first-out queue and a fixed wait, as before issue 26's rules), `sched` (two levels, admission by
 * predicted latency, the tenants shared by equal weight) and `auto` (`sched` with `maxWaitMs:
 * "auto"`).
 *
 * It reports, per policy and load: goodput (answers within their deadline per second, and as a
 * share of capacity), the high class's share within its deadline and its p99, the share of the
 * Worker's work thrown away (items computed whose answer was not given in time: the Worker counts
 * what it computed), 429s, and each tenant's goodput. Capacity is measured first, closed loop.
 * Goals (issue 26): at 3× the high class keeps ≥ 99 % within its deadline and goodput ≥ 90 % of
 * capacity; no work past its deadline is computed.
 */
import { closedLoop, counterTotal, openLoop, type Ask } from "../lib/http-load.js";
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, serverLines, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { percentile } from "../lib/stats.js";

export const defaults = { duration: 6, rounds: 1, warmup: 2 };

const FIXED_MS = 10;
const ITEM_MS = 2;
const MAX_BATCH = 16;
/** A full batch's time: the high class's deadline is 4× it. */
const BATCH_MS = FIXED_MS + ITEM_MS * MAX_BATCH;
const HIGH_DEADLINE_MS = 4 * BATCH_MS;
const LOW_DEADLINE_MS = 1000;
const POLICIES = ["fifo", "sched", "auto"] as const;
type Policy = (typeof POLICIES)[number];

/** One request's fate. */
interface Outcome {
  high: boolean;
  tenant: "a" | "b";
  status: number;
  ms: number;
}

interface Point {
  policy: Policy;
  load: number;
  offeredRps: number;
  goodputRps: number;
  goodputShare: number;
  highWithin: number;
  highP99Ms: number;
  lowP99Ms: number;
  rejected429: number;
  thrownAway: number;
  computed: number;
  tenantGoodput: { a: number; b: number };
  /** The high class's answers by status (0: no answer). */
  highStatus: Record<string, number>;
}

const BODY = Buffer.from('{"x":1}');

/** The load's request `index`: every tenth is high; tenants a, a, b in turn. */
function classOf(index: number): { high: boolean; tenant: "a" | "b" } {
  return { high: index % 10 === 0, tenant: index % 3 === 2 ? "b" : "a" };
}

function ask(index: number): Ask {
  const { high, tenant } = classOf(index);
  return { path: "/infer", body: BODY, headers: { "x-tenant": tenant, "x-shoal-timeout-ms": String(high ? HIGH_DEADLINE_MS : LOW_DEADLINE_MS), "x-shoal-priority": high ? "1" : "2" } };
}

/** Sends at `rate` a second for `seconds`, open loop; resolves with every request's outcome once all are answered. */
async function overload(port: number, rate: number, seconds: number): Promise<Outcome[]> {
  return (await openLoop(port, rate, seconds, ask)).map((a) => ({ ...classOf(a.index), status: a.status, ms: a.ms }));
}

/** Closed loop at `streams` concurrent requests for `seconds`: the items the Worker computed a second, its capacity. */
async function capacity(server: RunningServer, streams: number, seconds: number): Promise<number> {
  const before = await computed(server);
  const run = await closedLoop(server.port, streams, seconds, () => ({ path: "/infer", body: BODY }));
  return ((await computed(server)) - before) / run.seconds;
}

function computed(server: RunningServer): Promise<number> {
  return counterTotal(server.url, "bench_items_computed_total");
}

function point(policy: Policy, load: number, rate: number, seconds: number, cap: number, outcomes: Outcome[], work: number): Point {
  const deadline = (o: Outcome) => (o.high ? HIGH_DEADLINE_MS : LOW_DEADLINE_MS);
  const good = outcomes.filter((o) => o.status === 200 && o.ms <= deadline(o));
  const highs = outcomes.filter((o) => o.high);
  const served = (list: Outcome[]) => list.filter((o) => o.status === 200).map((o) => o.ms);
  const answered = outcomes.filter((o) => o.status === 200).length;
  return {
    policy,
    load,
    offeredRps: rate,
    goodputRps: good.length / seconds,
    goodputShare: good.length / seconds / cap,
    highWithin: good.filter((o) => o.high).length / Math.max(1, highs.length),
    highP99Ms: percentile(served(highs), 99),
    lowP99Ms: percentile(served(outcomes.filter((o) => !o.high)), 99),
    rejected429: outcomes.filter((o) => o.status === 429).length,
    thrownAway: work === 0 ? 0 : Math.max(0, work - answered) / work,
    computed: work,
    tenantGoodput: { a: good.filter((o) => o.tenant === "a").length / seconds, b: good.filter((o) => o.tenant === "b").length / seconds },
    highStatus: highs.reduce<Record<string, number>>((counts, o) => ((counts[o.status] = (counts[o.status] ?? 0) + 1), counts), {}),
  };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const { root, log, common } = ctx;
  const loads = String(ctx.values.loads ?? "1.5,3").split(",").map(Number);
  const seconds = common.durationSec;
  const points: Point[] = [];
  const commands: Record<string, string> = {};
  let cap = 0;
  for (const policy of POLICIES) {
    const port = await freePort();
    const server = await startServer({
      name: `shoal-${policy}`,
      script: "bench/servers/overload-server.ts",
      args: ["--policy", policy, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--timeout", String(LOW_DEADLINE_MS), "--capacity", "100000", "--tenant-key", "header:x-tenant"],
      port,
      cwd: root,
      env: { BENCH_FIXED_MS: String(FIXED_MS), BENCH_ITEM_MS: String(ITEM_MS), BENCH_MAX_BATCH: String(MAX_BATCH) },
      probe: { path: "/infer", body: "{}" },
    });
    commands[policy] = server.command;
    try {
      // Capacity once, on the first (the FIFO's, the same Worker for all), after a warm-up; each server warms up at capacity.
      if (cap === 0) {
        await capacity(server, 16 * MAX_BATCH, common.warmupSec);
        cap = await capacity(server, 16 * MAX_BATCH, Math.max(3, common.warmupSec));
        log(`capacity: ${fmtInt(cap)} items/s (a full batch every ${BATCH_MS} ms is ${fmtInt((1000 * MAX_BATCH) / BATCH_MS)}/s)`);
      } else await capacity(server, 16 * MAX_BATCH, common.warmupSec);
      for (const load of loads) {
        const rate = load * cap;
        const before = await computed(server);
        const outcomes = await overload(port, rate, seconds);
        const p = point(policy, load, rate, seconds, cap, outcomes, (await computed(server)) - before);
        points.push(p);
        log(`${policy} at ${load}×: goodput ${fmtInt(p.goodputRps)}/s (${(100 * p.goodputShare).toFixed(0)} % of capacity), high within deadline ${(100 * p.highWithin).toFixed(1)} %, high p99 ${fmtMs(p.highP99Ms)}, thrown away ${(100 * p.thrownAway).toFixed(1)} %, 429s ${p.rejected429}, high by status ${JSON.stringify(p.highStatus)}`);
        // Let the queue empty before the next load.
        await new Promise((resolve) => setTimeout(resolve, LOW_DEADLINE_MS + 200));
      }
    } finally {
      await server.stop();
    }
  }
  const rows = points.map((p) => [
    p.policy,
    `${p.load}×`,
    fmtInt(p.offeredRps),
    fmtInt(p.goodputRps),
    `${(100 * p.goodputShare).toFixed(0)} %`,
    `${(100 * p.highWithin).toFixed(1)} %`,
    fmtMs(p.highP99Ms),
    fmtMs(p.lowP99Ms),
    `${(100 * p.thrownAway).toFixed(1)} %`,
    fmtInt(p.rejected429),
    `${fmtInt(p.tenantGoodput.a)} / ${fmtInt(p.tenantGoodput.b)}`,
  ]);
  const headers = ["policy", "load", "offered/s", "goodput/s", "of capacity", "high within deadline", "high p99", "low p99", "thrown away", "429s", "goodput a / b"];
  const invocation = `npm run bench -- overload --duration ${seconds}`;
  const md = [
    ...reportHeader("overload: priorities, deadlines, admission and tenants at 1.5× and 3× capacity", { invocation, date: new Date().toISOString(), git: gitState(root), machine: machineInfo("no wrk: open-loop node:http client") }),
    "",
    `Capacity ${fmtInt(cap)} items/s (what the Worker computed, closed loop at ${16 * MAX_BATCH} concurrent). High class: 10 %, deadline ${HIGH_DEADLINE_MS} ms (4× a full batch of ${BATCH_MS} ms); low: ${LOW_DEADLINE_MS} ms. Tenants a (2/3 of the load) and b (1/3), equal weights. One worker.`,
    "",
    markdownTable(headers, rows),
    "",
    ...serverLines(commands),
  ].join("\n");
  const files = writeResults(ctx.resultsDir, "overload", { capacity: cap, highDeadlineMs: HIGH_DEADLINE_MS, lowDeadlineMs: LOW_DEADLINE_MS, points, commands }, md);
  log(`wrote ${files.md}`);
}

export const scenario: Scenario = {
  name: "overload",
  summary: "a compute-bound stage at 1.5× and 3× capacity, two priority classes and two tenants: FIFO against the scheduling rules",
  options: { loads: { type: "string" } },
  help: { loads: "loads as multiples of capacity, comma-separated (default 1.5,3)" },
  run,
};
