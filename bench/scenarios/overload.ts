/**
 * overload: a compute-bound stage (bench/servers/overload-server.ts: the CPU spun for 10 ms + 2 ms
 * an item of each batch of up to 16, on one worker) offered 1.5× and 3× its capacity, open loop
 * (requests sent at a fixed rate whatever the answers), with two priority classes (10 % high,
 * asking level 1 and a deadline of 4× a full batch's time; the rest level 2 and --timeout) and two
 * tenants (a sends two thirds, b one third). The same server three ways: `fifo` (one first-in,
 * first-out queue and a fixed wait, as before issue 26's rules), `sched` (two levels, admission by
 * predicted latency, the tenants shared by equal weight) and `auto` (`sched` with `maxWaitMs:
 * "auto"`); and the same forward (NumPy products for the same 10 ms + 2 ms an item,
 * bench/peers/spin_forward.py) behind Mosec (`mosec`) and MLServer (`mlserver`), one worker
 * process, batches of up to 16 within 2 ms, the same requests (they ignore the class headers;
 * neither has priorities or a deadline of a request; Mosec is given the same 1 s timeout).
 *
 * It reports, per policy and load: goodput (answers within their deadline per second, and as a
 * share of capacity), the high class's share within its deadline and its p99, the share of the
 * Worker's work thrown away (items computed whose answer was not given in time: the Worker counts
 * what it computed; for a peer, which has no such counter, the answers 200 given after their
 * deadline, a lower bound), 429s, and each tenant's goodput. Capacity is measured first, closed
 * loop, on `fifo`, and every server is offered the same rates; each one's own closed-loop answers
 * a second (its warm-up) are reported too.
 * Goals (issue 26): at 3× the high class keeps ≥ 99 % within its deadline and goodput ≥ 90 % of
 * capacity; no work past its deadline is computed.
 */
import { join } from "node:path";
import { closedLoop, counterTotal, openLoop, type Ask } from "../lib/http-load.js";
import { gitState, machineInfo } from "../lib/machine.js";
import { ensurePeers, mlserverSpec, mosecSpec, peerVersions } from "../lib/peers.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, serverLines, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, portEnv, startServer, type RunningServer, type ServerSpec } from "../lib/server.js";
import { percentile } from "../lib/stats.js";

export const defaults = { duration: 6, rounds: 1, warmup: 2 };

const FIXED_MS = 10;
const ITEM_MS = 2;
const MAX_BATCH = 16;
/** A full batch's time: the high class's deadline is 4× it. */
const BATCH_MS = FIXED_MS + ITEM_MS * MAX_BATCH;
const HIGH_DEADLINE_MS = 4 * BATCH_MS;
const LOW_DEADLINE_MS = 1000;
const POLICIES = ["fifo", "sched", "auto", "mosec", "mlserver"] as const;
type Policy = (typeof POLICIES)[number];
/** The servers that are not Shoal: no counter of the work computed. */
const PEERS: readonly Policy[] = ["mosec", "mlserver"];

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
  /** Its own answers a second closed loop (its warm-up). */
  ownCapacity: number;
  thrownAway: number;
  computed: number;
  tenantGoodput: { a: number; b: number };
  /** The high class's answers by status (0: no answer). */
  highStatus: Record<string, number>;
}

/** Where each server takes the load's request, and in what body. */
const TARGETS: Record<Policy, { path: string; body: Buffer }> = {
  fifo: { path: "/infer", body: Buffer.from('{"x":1}') },
  sched: { path: "/infer", body: Buffer.from('{"x":1}') },
  auto: { path: "/infer", body: Buffer.from('{"x":1}') },
  mosec: { path: "/inference", body: Buffer.from('{"x":1}') },
  mlserver: { path: "/v2/models/spin/infer", body: Buffer.from('{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1],"data":[1]}]}') },
};

/** The load's request `index`: every tenth is high; tenants a, a, b in turn. */
function classOf(index: number): { high: boolean; tenant: "a" | "b" } {
  return { high: index % 10 === 0, tenant: index % 3 === 2 ? "b" : "a" };
}

function ask(policy: Policy, index: number): Ask {
  const { high, tenant } = classOf(index);
  return { ...TARGETS[policy], headers: { "x-tenant": tenant, "x-shoal-timeout-ms": String(high ? HIGH_DEADLINE_MS : LOW_DEADLINE_MS), "x-shoal-priority": high ? "1" : "2" } };
}

/** Sends at `rate` a second for `seconds`, open loop; resolves with every request's outcome once all are answered. */
async function overload(policy: Policy, port: number, rate: number, seconds: number): Promise<Outcome[]> {
  return (await openLoop(port, rate, seconds, (i) => ask(policy, i))).map((a) => ({ ...classOf(a.index), status: a.status, ms: a.ms }));
}

/** Closed loop at `streams` concurrent requests for `seconds`: the items the Worker computed a second (its capacity), and the answers 200 a second. */
async function capacity(policy: Policy, server: RunningServer, streams: number, seconds: number): Promise<{ computed: number; answered: number }> {
  const peer = PEERS.includes(policy);
  const before = peer ? 0 : await computed(server);
  const run = await closedLoop(server.port, streams, seconds, () => TARGETS[policy]);
  const answered = run.answers.filter((a) => a.status === 200).length / run.seconds;
  return { computed: peer ? answered : ((await computed(server)) - before) / run.seconds, answered };
}

/** How to start each server; `root` is the repository. */
function specOf(policy: Policy, root: string): Omit<ServerSpec, "name" | "port" | "cwd"> {
  const env = { BENCH_FIXED_MS: String(FIXED_MS), BENCH_ITEM_MS: String(ITEM_MS), BENCH_MAX_BATCH: String(MAX_BATCH), BENCH_MAX_WAIT_MS: "2" };
  if (policy === "mosec") {
    const spec = mosecSpec(root, "mosec_spin.py", env, { path: TARGETS.mosec.path, body: TARGETS.mosec.body });
    return { ...spec, args: [...spec.args, "--timeout", String(LOW_DEADLINE_MS)] };
  }
  if (policy === "mlserver") return mlserverSpec(root, join("bench", "peers", "mlserver_spin"), env, { path: TARGETS.mlserver.path, body: TARGETS.mlserver.body });
  return {
    script: "bench/servers/overload-server.ts",
    args: ["--policy", policy, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--timeout", String(LOW_DEADLINE_MS), "--capacity", "100000", "--tenant-key", "header:x-tenant"],
    env,
    probe: { path: "/infer", body: "{}" },
  };
}

function computed(server: RunningServer): Promise<number> {
  return counterTotal(server.url, "bench_items_computed_total");
}

function point(policy: Policy, load: number, rate: number, seconds: number, cap: number, ownCapacity: number, outcomes: Outcome[], work: number): Point {
  const deadline = (o: Outcome) => (o.high ? HIGH_DEADLINE_MS : LOW_DEADLINE_MS);
  const good = outcomes.filter((o) => o.status === 200 && o.ms <= deadline(o));
  const highs = outcomes.filter((o) => o.high);
  const served = (list: Outcome[]) => list.filter((o) => o.status === 200).map((o) => o.ms);
  const inTime = good.length;
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
    ownCapacity,
    thrownAway: work === 0 ? 0 : Math.max(0, work - inTime) / work,
    computed: work,
    tenantGoodput: { a: good.filter((o) => o.tenant === "a").length / seconds, b: good.filter((o) => o.tenant === "b").length / seconds },
    highStatus: highs.reduce<Record<string, number>>((counts, o) => ((counts[o.status] = (counts[o.status] ?? 0) + 1), counts), {}),
  };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const { root, log, common } = ctx;
  const loads = String(ctx.values.loads ?? "1.5,3").split(",").map(Number);
  const policies = String(ctx.values.policies ?? POLICIES.join(",")).split(",") as Policy[];
  const unknown = policies.filter((p) => !POLICIES.includes(p));
  if (unknown.length > 0 || policies[0] !== "fifo") throw new Error(`--policies: fifo first (its capacity is the load's), then any of ${POLICIES.join(", ")}; not ${policies.join(",")}`);
  if (policies.some((p) => PEERS.includes(p))) ensurePeers(root, log);
  const seconds = common.durationSec;
  const points: Point[] = [];
  const commands: Record<string, string> = {};
  let cap = 0;
  for (const policy of policies) {
    const port = await freePort();
    const spec = specOf(policy, root);
    const server = await startServer({ ...spec, env: await portEnv(spec.env ?? {}, port), name: PEERS.includes(policy) ? policy : `shoal-${policy}`, port, cwd: root });
    commands[policy] = server.command;
    try {
      // Capacity once, on the first (the FIFO's, the same Worker for all), after a warm-up; each server warms up at capacity.
      let own = await capacity(policy, server, 16 * MAX_BATCH, common.warmupSec);
      if (cap === 0) {
        own = await capacity(policy, server, 16 * MAX_BATCH, Math.max(3, common.warmupSec));
        cap = own.computed;
        log(`capacity: ${fmtInt(cap)} items/s (a full batch every ${BATCH_MS} ms is ${fmtInt((1000 * MAX_BATCH) / BATCH_MS)}/s)`);
      }
      log(`${policy}: ${fmtInt(own.answered)} answers/s closed loop at ${16 * MAX_BATCH} concurrent`);
      for (const load of loads) {
        const rate = load * cap;
        const peer = PEERS.includes(policy);
        const before = peer ? 0 : await computed(server);
        const outcomes = await overload(policy, port, rate, seconds);
        // A peer counts no work: every answer 200 was computed, and those after their deadline thrown away.
        const work = peer ? outcomes.filter((o) => o.status === 200).length : (await computed(server)) - before;
        const p = point(policy, load, rate, seconds, cap, own.answered, outcomes, work);
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
    fmtInt(p.ownCapacity),
    `${fmtInt(p.tenantGoodput.a)} / ${fmtInt(p.tenantGoodput.b)}`,
  ]);
  const headers = ["policy", "load", "offered/s", "goodput/s", "of capacity", "high within deadline", "high p99", "low p99", "thrown away", "429s", "own closed-loop answers/s", "goodput a / b"];
  const invocation = `npm run bench -- overload --duration ${seconds} --policies ${policies.join(",")}`;
  const versions = peerVersions(root);
  const md = [
    ...reportHeader("overload: priorities, deadlines, admission and tenants at 1.5× and 3× capacity", { invocation, date: new Date().toISOString(), git: gitState(root), machine: machineInfo("no wrk: open-loop node:http client") }),
    "",
    `Capacity ${fmtInt(cap)} items/s (what the Worker computed, closed loop at ${16 * MAX_BATCH} concurrent). High class: 10 %, deadline ${HIGH_DEADLINE_MS} ms (4× a full batch of ${BATCH_MS} ms); low: ${LOW_DEADLINE_MS} ms. Tenants a (2/3 of the load) and b (1/3), equal weights. One worker. Mosec ${versions.mosec ?? "?"} and MLServer ${versions.mlserver ?? "?"} run the same forward (bench/peers/spin_forward.py) and see the same requests; their "thrown away" is the answers 200 given after their deadline.`,
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
  summary: "a compute-bound stage at 1.5× and 3× capacity, two priority classes and two tenants: FIFO against the scheduling rules, Mosec and MLServer",
  options: { loads: { type: "string" }, policies: { type: "string" } },
  help: { loads: "loads as multiples of capacity, comma-separated (default 1.5,3)", policies: `the servers, fifo first, comma-separated (default ${POLICIES.join(",")})` },
  run,
};
