/**
 * chat: SmolLM2-135M-Instruct (npm run models -- smollm2) run by llama.cpp as examples/chat
 * serves it, three ways at the same thread count: continuous batching (sequences join and leave
 * between steps, up to `--max-batch` at once), request-level batching (a batch of up to
 * `--max-batch` requests runs until its longest ends; the next waits) and one sequence at a time.
 * Each client sends a chat, reads its Server-Sent Events to the end and sends the next (closed
 * loop), asking for lengths drawn log-uniformly from `--min-tokens`..`--max-tokens` (8..64), the
 * same seeded sequence for every mode. Reported as `vllm bench serve` reports them: output tokens
 * per second, time to first token and inter-token latency, p50 and p99.
 *
 * Results go to bench/results/chat.{json,md} with chat-tokens.svg and chat-ttft.svg.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { gitState, machineInfo } from "../lib/machine.js";
import { fmtInt, markdownTable, reportHeader, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { lengths, list, number, streamSweep, type StreamRow } from "../lib/stream-load.js";
import { lineChart } from "../../src/bench/svg.js";

export const defaults = { duration: 10, rounds: 1, warmup: 3 };

const MODES = ["continuous", "request", "one"] as const;
type Mode = (typeof MODES)[number];
type Row = StreamRow<Mode>;

const NAMES: Record<Mode, string> = { continuous: "continuous batching", request: "request-level batching", one: "one sequence at a time" };
const MESSAGES = [{ role: "user", content: "Tell me about the fish of the North Sea." }];

async function run(ctx: ScenarioContext): Promise<void> {
  const { values, root, log } = ctx;
  const connections = list(values.connections, [1, 4, 16, 32]);
  const maxBatch = number(values["max-batch"], 16);
  const minTokens = number(values["min-tokens"], 8);
  const maxTokens = number(values["max-tokens"], 64);
  const threads = number(values.threads, 1);
  const seed = number(values.seed, 1);
  const { built, dir } = await ensureModel("smollm2");
  if (built) log(`fetched SmolLM2 into ${dir}`);
  const rows = await streamSweep(ctx, {
    modes: MODES,
    connections,
    path: "/chat",
    server: (mode, port) => ({
      name: mode,
      script: "examples/chat/server.ts",
      args: ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--stream-timeout", "600000", "--timeout", "300000", "--capacity", "100000"],
      port,
      cwd: root,
      env: { SEQUENCES: String(mode === "one" ? 1 : maxBatch), CONTINUOUS: mode === "request" ? "0" : "1", THREADS: String(threads), CONTEXT_SIZE: "512" },
      probe: { path: "/chat", body: JSON.stringify({ prompt: "hello", max_tokens: 2 }) },
      startTimeoutMs: 60_000,
    }),
    lengths: (round) => lengths(seed + round, minTokens, maxTokens),
    body: (length) => JSON.stringify({ messages: MESSAGES, max_tokens: length, temperature: 0, ignore_eos: true }),
  });
  report(ctx, rows, { connections, maxBatch, minTokens, maxTokens, threads });
}

function report(ctx: ScenarioContext, rows: Row[], settings: { connections: number[]; maxBatch: number; minTokens: number; maxTokens: number; threads: number }): void {
  const at = (mode: Mode, c: number) => rows.find((r) => r.mode === mode && r.connections === c);
  // The goal is stated at 16 streams; without that point, at the most clients measured.
  const goalAt = settings.connections.includes(16) ? 16 : Math.max(...settings.connections);
  const continuous = at("continuous", goalAt)!;
  const request = at("request", goalAt)!;
  const one = at("one", goalAt)!;
  const ratio = continuous.tokensPerSec / request.tokensPerSec;
  const ttftBetter = continuous.ttftP99 < request.ttftP99;
  mkdirSync(ctx.resultsDir, { recursive: true });
  const series = (pick: (r: Row) => number) => MODES.map((mode) => ({ name: NAMES[mode], points: rows.filter((r) => r.mode === mode).map((r) => [r.connections, pick(r)] as const) }));
  writeFileSync(join(ctx.resultsDir, "chat-tokens.svg"), lineChart(series((r) => r.tokensPerSec), { title: "chat (SmolLM2-135M, llama.cpp): output tokens per second", xLabel: "streams", yLabel: "tokens/s", logX: true }));
  writeFileSync(join(ctx.resultsDir, "chat-ttft.svg"), lineChart(series((r) => r.ttftP99), { title: "chat: time to first token, p99", xLabel: "streams", yLabel: "ms", logX: true }));
  const invocation = `npm run bench -- ${process.argv.slice(2).join(" ")}`;
  const md = [
    ...reportHeader("chat: SmolLM2-135M-Instruct on llama.cpp, continuous against request-level batching and one sequence at a time", { invocation, date: new Date().toISOString(), git: gitState(ctx.root), machine: machineInfo("no wrk (a streaming client of the benchmark's own)") }),
    `- Model: SmolLM2-135M-Instruct, GGUF Q4_1, llama.cpp (node-llama-cpp, CPU) with ${settings.threads} threads, one worker (a child process) serving examples/chat's route; at most ${settings.maxBatch} sequences at once in both batching modes, 1 in the last; lengths ${settings.minTokens}..${settings.maxTokens} tokens, log-uniform, \`ignore_eos\`, greedy.`,
    `- ${ctx.common.rounds} round(s) of ${ctx.common.durationSec} s per point after ${ctx.common.warmupSec} s of warm-up; medians over the rounds. Inter-token latency: the gaps between the chunks of each stream, as \`vllm bench serve\` reports ITL.`,
    "",
    `At ${goalAt} streams continuous batching makes ${ratio.toFixed(2)}× the tokens per second of request-level batching (goal ≥ 2×: ${ratio >= 2 ? "met" : "NOT met"}) and ${(continuous.tokensPerSec / one.tokensPerSec).toFixed(2)}× that of one sequence at a time; its p99 time to first token is ${ttftBetter ? "lower" : "NOT lower"} (${continuous.ttftP99.toFixed(0)} ms against ${request.ttftP99.toFixed(0)} ms).`,
    "",
    "![tokens per second](chat-tokens.svg) ![time to first token](chat-ttft.svg)",
    "",
    markdownTable(
      ["mode", "streams", "tokens/s", "req/s", "TTFT p50 (ms)", "TTFT p99 (ms)", "ITL p50 (ms)", "ITL p99 (ms)", "request p50 (ms)", "request p99 (ms)", "errors"],
      rows.map((r) => [r.mode, String(r.connections), fmtInt(r.tokensPerSec), r.requestsPerSec.toFixed(1), r.ttftP50.toFixed(0), r.ttftP99.toFixed(0), r.itlP50.toFixed(1), r.itlP99.toFixed(1), r.latencyP50.toFixed(0), r.latencyP99.toFixed(0), String(r.errors)]),
      ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
    ),
  ].join("\n");
  const paths = writeResults(ctx.resultsDir, "chat", { settings, rows, ratio }, md);
  ctx.log(`continuous / request-level tokens/s at ${goalAt} streams: ${ratio.toFixed(2)}x; wrote ${paths.md}`);
}

export const scenario: Scenario = {
  name: "chat",
  summary: "SmolLM2 on llama.cpp: continuous against request-level batching and one sequence at a time, tokens/s, TTFT and ITL at 1..32 streams.",
  options: {
    connections: { type: "string" },
    "max-batch": { type: "string" },
    "min-tokens": { type: "string" },
    "max-tokens": { type: "string" },
    threads: { type: "string" },
    seed: { type: "string" },
  },
  help: {
    "connections <list>": "concurrent streams, comma-separated (default 1,4,16,32)",
    "max-batch <n>": "most sequences generating at once, both batching modes (default 16)",
    "min-tokens <n>": "shortest generation asked for (default 8)",
    "max-tokens <n>": "longest generation asked for (default 64)",
    "threads <n>": "llama.cpp threads of the worker (default 1: on a shared machine more threads than free cores make llama.cpp spin)",
    "seed <n>": "seed of the lengths (default 1)",
  },
  run,
};
