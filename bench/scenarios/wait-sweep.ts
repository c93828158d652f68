/**
 * wait-sweep: `maxWaitMs: "auto"` against a sweep of fixed waits. The compute-bound stage of the
 * overload scenario (bench/servers/overload-server.ts --policy plain: 10 ms + 2 ms an item of
 * each batch of up to 16, one worker) with maxWaitMs 0, 1, 2, 5, 10, 20 and "auto", side by side,
 * closed loop at several loads (concurrent clients).
 *
 * It reports, per load, each server's answers a second, p99 and mean batch, the best fixed wait's
 * throughput, and auto's as a share of it: of the medians over rounds, and the median over rounds
 * of auto's share of that wait in the same round. Goal (issue 26): auto within 5 % of the best
 * fixed wait's throughput at every load, without tuning.
 */
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, serverLines, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { medianPoint, sideBySide } from "../lib/side-by-side.js";
import { median } from "../lib/stats.js";

export const defaults = { duration: 3, rounds: 2, warmup: 2 };

const BODY = Buffer.from('{"x":1}');
/** Its mean batch size, from the stage's batch-size histogram. */
const COUNTERS = ["shoal_stage_batch_size_sum", "shoal_stage_batch_size_count"];

async function run(ctx: ScenarioContext): Promise<void> {
  const { root, log, common } = ctx;
  const loads = String(ctx.values.streams ?? "1,4,12,24,64").split(",").map(Number);
  const waits = String(ctx.values.waits ?? "0,1,2,5,10,20").split(",");
  const names = [...waits.map((w) => `wait ${w}`), "auto"];
  const { points, commands } = await sideBySide({
    cwd: root,
    contenders: [...waits, "auto"].map((wait, i) => ({
      name: names[i]!,
      script: "bench/servers/overload-server.ts",
      args: ["--policy", "plain", "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--capacity", "100000"],
      env: { BENCH_MAX_WAIT_MS: wait },
    })),
    streams: loads,
    rounds: common.rounds,
    seconds: common.durationSec,
    warmupSec: common.warmupSec,
    make: () => ({ path: "/infer", body: BODY }),
    probe: { path: "/infer", body: "{}" },
    counters: COUNTERS,
    log,
  });
  const rows: string[][] = [];
  const summary = [];
  for (const streams of loads) {
    const fixed = names.slice(0, -1).map((name) => ({ name, ...medianPoint(points, name, streams) }));
    const best = fixed.reduce((a, b) => (b.rps > a.rps ? b : a));
    const auto = medianPoint(points, "auto", streams);
    // The best fixed wait is the best of six noisy medians, which favours it; auto against it in
    // the same round (measured next to each other) is the fairer ratio.
    const rps = (name: string, round: number) => points.find((p) => p.name === name && p.streams === streams && p.round === round)?.rps ?? NaN;
    const paired = median(Array.from({ length: common.rounds }, (_, i) => rps("auto", i + 1) / rps(best.name, i + 1)));
    summary.push({ streams, best: best.name, bestRps: best.rps, autoRps: auto.rps, share: auto.rps / best.rps, paired, fixed, auto });
    const cell = (p: { rps: number; p99Ms: number; counters: Record<string, number> }) => `${fmtInt(p.rps)} (${fmtMs(p.p99Ms)}; ${meanBatch(p.counters).toFixed(1)})`;
    rows.push([String(streams), ...fixed.map(cell), cell(auto), best.name, `${((100 * auto.rps) / best.rps).toFixed(1)} %`, `${(100 * paired).toFixed(1)} %`]);
  }
  const headers = ["streams", ...names.map((n) => `${n}: answers/s (p99 ms; mean batch)`), "best fixed", "auto of best", "auto of best, by round"];
  const invocation = `npm run bench -- wait-sweep --duration ${common.durationSec} --rounds ${common.rounds} --warmup ${common.warmupSec}`;
  const md = [
    ...reportHeader('wait-sweep: maxWaitMs "auto" against fixed waits', { invocation, date: new Date().toISOString(), git: gitState(root), machine: machineInfo("no wrk: closed-loop node:http clients") }),
    "",
    `The overload scenario's stage (10 ms + 2 ms an item, batches of up to 16, one worker), closed loop. Medians of ${common.rounds} rounds of ${common.durationSec} s after ${common.warmupSec} s of warm-up at ${Math.max(...loads)} clients, the servers in alternating order; "by round": the median of auto's share of the best fixed wait in each round.`,
    "",
    markdownTable(headers, rows),
    "",
    ...serverLines(commands, "Servers (BENCH_MAX_WAIT_MS set to each wait):"),
  ].join("\n");
  const files = writeResults(ctx.resultsDir, "wait-sweep", { summary, points, commands }, md);
  log(`wrote ${files.md}`);
}

function meanBatch(counters: Record<string, number>): number {
  return counters.shoal_stage_batch_size_sum! / Math.max(1, counters.shoal_stage_batch_size_count!);
}

export const scenario: Scenario = {
  name: "wait-sweep",
  summary: 'maxWaitMs "auto" against fixed waits (0..20 ms) on a compute-bound stage at several loads',
  options: { streams: { type: "string" }, waits: { type: "string" } },
  help: { streams: "loads as concurrent clients, comma-separated (default 1,4,12,24,64)", waits: "the fixed waits in ms, comma-separated (default 0,1,2,5,10,20)" },
  run,
};
