/**
 * lengths: cost-aware batching on inputs of mixed lengths. A Worker that pads each batch to its
 * longest item (bench/servers/lengths-server.ts: 3 ms + 0.008 ms a token of the padded batch, as
 * a sequence model over a padded tensor; batches of up to 16, one worker) is sent texts of 16,
 * 64 and 256 characters (70 %, 20 % and 10 %, mixed), closed loop, three ways side by side:
 * `count` (batches bounded by their count only), `cost` (and by `maxBatchCost`, an item's cost
 * its body's bytes) and `buckets` (and by `batchBuckets` too: a batch of one length bucket).
 *
 * It reports, per policy and load (concurrent clients), answers a second, p50 and p99, the mean
 * batch size and the padded tokens computed per item, and each policy's throughput as a ratio of
 * `count`'s at the same load (medians over rounds). Goal (issue 26): ≥ 1.3× at equal p99.
 */
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, serverLines, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { medianPoint, sideBySide } from "../lib/side-by-side.js";
import { median } from "../lib/stats.js";

export const defaults = { duration: 5, rounds: 3, warmup: 2 };

const POLICIES = ["count", "cost", "buckets"] as const;
/** Text lengths by the load's request index: of every 10 requests, 7 short, 2 medium, 1 long, in a scrambled order. */
const LENGTHS = [16, 16, 64, 16, 256, 16, 16, 64, 16, 16];
const BODIES = LENGTHS.map((n) => Buffer.from(JSON.stringify({ t: "x".repeat(n) })));
const COUNTERS = ["bench_items_computed_total", "bench_padded_tokens_total", "shoal_stage_batch_size_sum", "shoal_stage_batch_size_count"];

async function run(ctx: ScenarioContext): Promise<void> {
  const { root, log, common } = ctx;
  const loads = String(ctx.values.streams ?? "32,128").split(",").map(Number);
  const { points, commands } = await sideBySide({
    cwd: root,
    contenders: POLICIES.map((policy) => ({ name: policy, script: "bench/servers/lengths-server.ts", args: ["--policy", policy, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--capacity", "100000"] })),
    streams: loads,
    rounds: common.rounds,
    seconds: common.durationSec,
    warmupSec: common.warmupSec,
    // Scrambled so that neighbours in time differ in length: i × 7 mod 10 visits every slot.
    make: (index) => ({ path: "/infer", body: BODIES[(index * 7) % 10]! }),
    classOf: (index) => String(LENGTHS[(index * 7) % 10]),
    probe: { path: "/infer", body: '{"t":"x"}' },
    counters: COUNTERS,
    log,
  });
  const per = (name: string, streams: number, f: (c: Record<string, number>) => number) => median(points.filter((p) => p.name === name && p.streams === streams).map((p) => f(p.counters)));
  const rows: string[][] = [];
  const summary = [];
  for (const streams of loads) {
    const base = medianPoint(points, "count", streams).rps;
    for (const policy of POLICIES) {
      const m = medianPoint(points, policy, streams);
      const batch = per(policy, streams, (c) => c.shoal_stage_batch_size_sum! / c.shoal_stage_batch_size_count!);
      const padded = per(policy, streams, (c) => c.bench_padded_tokens_total! / c.bench_items_computed_total!);
      summary.push({ policy, streams, ...m, meanBatch: batch, paddedPerItem: padded, ratio: m.rps / base });
      rows.push([policy, String(streams), fmtInt(m.rps), `${(m.rps / base).toFixed(2)}×`, fmtMs(m.p50Ms), fmtMs(m.p99Ms), batch.toFixed(1), padded.toFixed(0), String(m.errors)]);
    }
  }
  const headers = ["policy", "streams", "answers/s", "vs count", "p50", "p99", "mean batch", "padded tokens an item", "errors"];
  const invocation = `npm run bench -- lengths --duration ${common.durationSec} --rounds ${common.rounds}`;
  const md = [
    ...reportHeader("lengths: count-only batching against cost budgets and length buckets on mixed lengths", { invocation, date: new Date().toISOString(), git: gitState(root), machine: machineInfo("no wrk: closed-loop node:http clients") }),
    "",
    `A Worker padding each batch to its longest item (3 ms + 0.008 ms a padded token, batches of up to 16, one worker); texts of 16, 64 and 256 characters, 70/20/10 %. Medians of ${common.rounds} rounds of ${common.durationSec} s, the servers in alternating order.`,
    "",
    markdownTable(headers, rows),
    "",
    ...serverLines(commands),
  ].join("\n");
  const files = writeResults(ctx.resultsDir, "lengths", { summary, points, commands }, md);
  log(`wrote ${files.md}`);
}

export const scenario: Scenario = {
  name: "lengths",
  summary: "mixed input lengths on a Worker that pads to the longest: count-only batching against maxBatchCost and batchBuckets",
  options: { streams: { type: "string" } },
  help: { streams: "loads as concurrent clients, comma-separated (default 32,128)" },
  run,
};
