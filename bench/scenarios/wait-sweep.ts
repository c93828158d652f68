/**
 * wait-sweep: `maxWaitMs: "auto"` against a sweep of fixed waits. The compute-bound stage of the
 * overload scenario (bench/servers/overload-server.ts --policy plain: 10 ms + 2 ms an item of
 * each batch of up to 16, one worker) with maxWaitMs 0, 1, 2, 5, 10, 20 and "auto", side by side,
 * closed loop at several loads (concurrent clients).
 *
 * It reports, per load, each server's answers a second and p99, the best fixed wait's throughput,
 * and auto's as a share of it (medians over rounds). Goal (issue 26): auto within 5 % of the best
 * fixed wait's throughput at every load, without tuning.
 */
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, serverLines, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { medianPoint, sideBySide } from "../lib/side-by-side.js";

export const defaults = { duration: 3, rounds: 2, warmup: 2 };

const BODY = Buffer.from('{"x":1}');

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
    counters: [],
    log,
  });
  const rows: string[][] = [];
  const summary = [];
  for (const streams of loads) {
    const fixed = names.slice(0, -1).map((name) => ({ name, ...medianPoint(points, name, streams) }));
    const best = fixed.reduce((a, b) => (b.rps > a.rps ? b : a));
    const auto = medianPoint(points, "auto", streams);
    summary.push({ streams, best: best.name, bestRps: best.rps, autoRps: auto.rps, share: auto.rps / best.rps, fixed, auto });
    rows.push([String(streams), ...fixed.map((f) => `${fmtInt(f.rps)} (${fmtMs(f.p99Ms)})`), `${fmtInt(auto.rps)} (${fmtMs(auto.p99Ms)})`, best.name, `${((100 * auto.rps) / best.rps).toFixed(1)} %`]);
  }
  const headers = ["streams", ...names.map((n) => `${n}: answers/s (p99 ms)`), "best fixed", "auto of best"];
  const invocation = `npm run bench -- wait-sweep --duration ${common.durationSec} --rounds ${common.rounds}`;
  const md = [
    ...reportHeader('wait-sweep: maxWaitMs "auto" against fixed waits', { invocation, date: new Date().toISOString(), git: gitState(root), machine: machineInfo("no wrk: closed-loop node:http clients") }),
    "",
    `The overload scenario's stage (10 ms + 2 ms an item, batches of up to 16, one worker), closed loop. Medians of ${common.rounds} rounds of ${common.durationSec} s, the servers in alternating order.`,
    "",
    markdownTable(headers, rows),
    "",
    ...serverLines(commands, "Servers (BENCH_MAX_WAIT_MS set to each wait):"),
  ].join("\n");
  const files = writeResults(ctx.resultsDir, "wait-sweep", { summary, points, commands }, md);
  log(`wrote ${files.md}`);
}

export const scenario: Scenario = {
  name: "wait-sweep",
  summary: 'maxWaitMs "auto" against fixed waits (0..20 ms) on a compute-bound stage at several loads',
  options: { streams: { type: "string" }, waits: { type: "string" } },
  help: { streams: "loads as concurrent clients, comma-separated (default 1,4,12,24,64)", waits: "the fixed waits in ms, comma-separated (default 0,1,2,5,10,20)" },
  run,
};
