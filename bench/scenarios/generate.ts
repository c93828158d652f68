/**
 * generate: continuous batching against request-level batching of the same text generator, at
 * the same most sequences at once (`--max-batch`). Requests ask for lengths drawn log-uniformly
 * from `--min-tokens`..`--max-tokens` (8..256), the same seeded sequence for both; each client
 * reads its stream of Server-Sent Events to the end and sends the next (closed loop, 1..64
 * clients). Reported: tokens per second, requests per second, and the time to the first token
 * (p50, p99). With request-level batching a batch runs until its longest sequence ends, and a
 * request that arrives meanwhile waits for it; with continuous batching it joins at the next step.
 *
 * The model is the tiny decoder of examples/generate, made at the start into a temporary folder
 * (`--model synthetic` uses a stand-in of fixed step cost instead). Results go to
 * bench/results/generate.{json,md} with generate-tokens.svg and generate-ttft.svg.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, markdownTable, reportHeader, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { lengths, list, number, streamSweep, type StreamRow } from "../lib/stream-load.js";
import { lineChart } from "../../src/bench/svg.js";

export const defaults = { duration: 10, rounds: 3, warmup: 3 };

const MODES = ["continuous", "request"] as const;
type Mode = (typeof MODES)[number];

type Row = StreamRow<Mode>;

async function run(ctx: ScenarioContext): Promise<void> {
  const { values, root, log } = ctx;
  const connections = list(values.connections, [1, 8, 32, 64]);
  const maxBatch = number(values["max-batch"], 16);
  const minTokens = number(values["min-tokens"], 8);
  const maxTokens = number(values["max-tokens"], 256);
  const seed = number(values.seed, 1);
  const model = values.model === "synthetic" ? "synthetic" : "tiny";
  const dir = mkdtempSync(join(tmpdir(), "shoal-generate-"));
  try {
    if (model === "tiny") {
      const { makeTinyGpt } = await import("../../examples/generate/make-model.js");
      await makeTinyGpt(dir);
      log(`made the tiny decoder in ${dir}`);
    }
    const rows = await streamSweep(ctx, {
      modes: MODES,
      connections,
      path: "/generate",
      server: (mode, port) => ({
        name: mode,
        script: "bench/servers/shoal-generate.ts",
        args: ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--stream-timeout", "600000", "--timeout", "120000", "--capacity", "100000"],
        port,
        cwd: root,
        env: { BENCH_BATCHING: mode, BENCH_MAX_BATCH: String(maxBatch), BENCH_MODEL: model, MODEL_DIR: dir },
        probe: { path: "/generate", body: JSON.stringify({ prompt: "hello", max_tokens: 2 }) },
        startTimeoutMs: 60_000,
      }),
      lengths: (round) => lengths(seed + round, minTokens, maxTokens),
      body: (length) => JSON.stringify({ prompt: "fish swim in shoals", max_tokens: length, temperature: 0, ignore_eos: true }),
    });
    report(ctx, rows, { connections, maxBatch, minTokens, maxTokens, model });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(ctx: ScenarioContext, rows: Row[], settings: { connections: number[]; maxBatch: number; minTokens: number; maxTokens: number; model: string }): void {
  const at = (mode: Mode, c: number) => rows.find((r) => r.mode === mode && r.connections === c)!;
  const top = Math.max(...settings.connections);
  const ratio = at("continuous", top).tokensPerSec / at("request", top).tokensPerSec;
  const ttftBetter = at("continuous", top).ttftP99 < at("request", top).ttftP99;
  mkdirSync(ctx.resultsDir, { recursive: true });
  const series = (pick: (r: Row) => number) => MODES.map((mode) => ({ name: mode === "continuous" ? "continuous batching" : "request-level batching", points: rows.filter((r) => r.mode === mode).map((r) => [r.connections, pick(r)] as const) }));
  writeFileSync(join(ctx.resultsDir, "generate-tokens.svg"), lineChart(series((r) => r.tokensPerSec), { title: "generate: tokens per second", xLabel: "clients", yLabel: "tokens/s", logX: true }));
  writeFileSync(join(ctx.resultsDir, "generate-ttft.svg"), lineChart(series((r) => r.ttftP99), { title: "generate: time to first token, p99", xLabel: "clients", yLabel: "ms", logX: true }));
  const invocation = `npm run bench -- ${process.argv.slice(2).join(" ")}`;
  const md = [
    ...reportHeader("generate: continuous against request-level batching", { invocation, date: new Date().toISOString(), git: gitState(ctx.root), machine: machineInfo("no wrk (a streaming client of the benchmark's own)") }),
    `- Model: ${settings.model === "tiny" ? "the tiny random decoder of examples/generate (ONNX Runtime, KV cache)" : "a synthetic step of 2 + 0.1·n ms"}; at most ${settings.maxBatch} sequences at once in both modes; lengths ${settings.minTokens}..${settings.maxTokens} tokens, log-uniform.`,
    `- ${ctx.common.rounds} rounds of ${ctx.common.durationSec} s per point after ${ctx.common.warmupSec} s of warm-up; medians over the rounds.`,
    "",
    `At ${top} clients continuous batching makes ${ratio.toFixed(2)}× the tokens per second of request-level batching (goal ≥ 2×: ${ratio >= 2 ? "met" : "NOT met"}), and its p99 time to first token is ${ttftBetter ? "lower" : "NOT lower"} (${at("continuous", top).ttftP99.toFixed(0)} ms against ${at("request", top).ttftP99.toFixed(0)} ms).`,
    "",
    "![tokens per second](generate-tokens.svg) ![time to first token](generate-ttft.svg)",
    "",
    markdownTable(
      ["batching", "clients", "tokens/s", "req/s", "first token p50 (ms)", "first token p99 (ms)", "request p50 (ms)", "request p99 (ms)", "errors"],
      rows.map((r) => [r.mode, String(r.connections), fmtInt(r.tokensPerSec), r.requestsPerSec.toFixed(1), r.ttftP50.toFixed(1), r.ttftP99.toFixed(1), r.latencyP50.toFixed(0), r.latencyP99.toFixed(0), String(r.errors)]),
      ["l", "r", "r", "r", "r", "r", "r", "r", "r"],
    ),
  ].join("\n");
  const paths = writeResults(ctx.resultsDir, "generate", { settings, rows, ratio }, md);
  ctx.log(`continuous / request-level tokens/s at ${top} clients: ${ratio.toFixed(2)}x; wrote ${paths.md}`);
}

export const scenario: Scenario = {
  name: "generate",
  summary: "Continuous against request-level batching of a streaming text generator: tokens/s and time to first token at 1..64 clients.",
  options: {
    connections: { type: "string" },
    "max-batch": { type: "string" },
    "min-tokens": { type: "string" },
    "max-tokens": { type: "string" },
    model: { type: "string" },
    seed: { type: "string" },
  },
  help: {
    "connections <list>": "clients, comma-separated (default 1,8,32,64)",
    "max-batch <n>": "most sequences generating at once, both modes (default 16)",
    "min-tokens <n>": "shortest generation asked for (default 8)",
    "max-tokens <n>": "longest generation asked for (default 256)",
    "model <tiny|synthetic>": "the tiny ONNX decoder of examples/generate (default), or a stand-in of fixed step cost",
    "seed <n>": "seed of the lengths (default 1)",
  },
  run,
};
