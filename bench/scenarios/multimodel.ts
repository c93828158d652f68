/**
 * multimodel: 20 small ONNX models (64→128→10 MLPs, different weights) loaded at once, on a shared
 * pool of 2 workers: Shoal's `--model-repository` against MLServer's default shared inference
 * pool (parallel_workers 2, every model on every worker). Both speak V2; the load goes to every
 * model in turn. Reported: resident memory of each server's whole process tree (from /proc) once
 * the models are loaded, at the end of the load and 5 s later, and throughput.
 *
 * Mosec serves one pipeline per server and has no model repository, so it is listed as not
 * measured. Unpinned: the pools need both cores.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { cacheDir, ensureMlp, ensurePeers, mlserverSpec } from "../lib/peers.js";
import { treeMemory, type TreeMemory } from "../lib/proctree.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { peakRps, report, sweep, sweepOptions, sweepSettings, wantsPeers, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";
import { row } from "./model.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

const SHAPE = { inputs: 64, hidden: 128, layers: 1, outputs: 10 };
const WORKERS = 2;
/**
 * How long the servers sit idle after the load before their memory is read again: Shoal's idle
 * collection (`--idle-gc`, 30 s by default) runs once a whole period idle follows a busy one.
 */
const SETTLE_MS = 65_000;

/** Writes both repositories under bench/.cache (afresh, so that settings changes apply); returns their folders. */
function repositories(root: string, count: number, log: (line: string) => void): { shoal: string; mlserver: string; names: string[] } {
  const shoal = join(cacheDir(root), "repo-shoal");
  const mlserver = join(cacheDir(root), "repo-mlserver");
  const peer = join(root, "bench", "peers", "mlserver_multimodel");
  for (const dir of [shoal, mlserver]) rmSync(dir, { recursive: true, force: true });
  mkdirSync(mlserver, { recursive: true });
  copyFileSync(join(peer, "settings.json"), join(mlserver, "settings.json"));
  const template = readFileSync(join(peer, "model-settings.json"), "utf8");
  const names: string[] = [];
  for (let i = 1; i <= count; i++) {
    const n = String(i).padStart(2, "0");
    const name = `m${n}`;
    const model = ensureMlp(root, `small-${n}`, { ...SHAPE, seed: i }, log);
    for (const dir of [join(shoal, name), join(mlserver, name)]) {
      mkdirSync(dir, { recursive: true });
      copyFileSync(model, join(dir, "model.onnx"));
    }
    writeFileSync(join(shoal, name, "model-settings.json"), JSON.stringify({ name, runtime: "onnx", maxBatchSize: 32, maxWaitMs: 5 }) + "\n");
    writeFileSync(join(mlserver, name, "model-settings.json"), template.replace("{n}", n));
    names.push(name);
  }
  return { shoal: relative(root, shoal), mlserver: relative(root, mlserver), names };
}

const mib = (m: TreeMemory | undefined) => (m === undefined ? "n/a" : `${(m.pssBytes / 2 ** 20).toFixed(0)} MiB PSS, ${(m.rssBytes / 2 ** 20).toFixed(0)} MiB RSS, ${m.processes} processes`);

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { root, log } = ctx;
  const s = sweepSettings(ctx, "unpinned");
  const count = Number((ctx.values.models as string | undefined) ?? 20);
  if (!Number.isInteger(count) || count < 1 || count > 99) throw new Error("--models must be a whole number from 1 to 99");
  if (wantsPeers(s, ["mlserver"])) ensurePeers(root, log);
  const repo = repositories(root, count, log);
  const body = JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, SHAPE.inputs], data: row(SHAPE.inputs) }] });
  const last = `/v2/models/${repo.names.at(-1)}/infer`;
  const probe = {
    path: last,
    body,
    check: (t: string) => ((JSON.parse(t) as { outputs?: { data?: number[] }[] }).outputs?.[0]?.data?.length === SHAPE.outputs ? undefined : `expected ${SHAPE.outputs} outputs, got ${t.slice(0, 80)}`),
  };
  const load = { path: last, body, lua: join("bench", "lua", "post-rotate.lua"), wrkEnv: { WRK_PATHS: repo.names.map((n) => `/v2/models/${n}/infer`).join(",") } };
  const contenders: Contender[] = [
    {
      name: "shoal",
      shoal: true,
      config: `\`shoal serve --model-repository ${repo.shoal} --workers ${WORKERS}\`: ${count} ONNX models (runtime "onnx", maxBatchSize 32, maxWaitMs 5) on one shared pool of ${WORKERS} worker threads`,
      // Its gRPC service (served, as MLServer's is) on a free port: 8001 may be taken.
      spec: { script: "dist/cli/main.js", args: ["serve", "--model-repository", repo.shoal, "--workers", String(WORKERS), "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], env: { SHOAL_GRPC_PORT: "{free}" }, probe, startTimeoutMs: 120_000 },
      ...load,
    },
    {
      name: "mlserver",
      config: `\`mlserver start ${repo.mlserver}\`: ${count} models with the custom runtime of bench/peers/mlserver_model/ (adaptive batching 32 / 5 ms), its default shared inference pool, parallel_workers ${WORKERS} (bench/peers/mlserver_multimodel/)`,
      spec: mlserverSpec(root, repo.mlserver, { PYTHONPATH: join(root, "bench", "peers", "mlserver_model") }, probe),
      ...load,
    },
    { name: "mosec", config: "Mosec", unavailable: "one pipeline per server and no model repository: 20 models would be 20 servers", path: "", body: "" },
  ];
  const memory: Record<string, { loaded?: TreeMemory; afterLoad?: TreeMemory; settled?: TreeMemory }> = {};
  const result = await sweep(ctx, "multimodel", `multimodel: ${count} small ONNX models on a shared pool of ${WORKERS} workers`, contenders, s, {
    afterStart: async (servers) => {
      for (const [name, server] of servers) {
        memory[name] = { loaded: treeMemory(server.pid) };
        log(`  ${name} with ${count} models loaded: ${mib(memory[name]!.loaded)}`);
      }
    },
    afterSweep: async (servers) => {
      for (const [name, server] of servers) {
        memory[name]!.afterLoad = treeMemory(server.pid);
        log(`  ${name} after the load: ${mib(memory[name]!.afterLoad)}`);
      }
      // What a server keeps once a burst is over, rather than the garbage of its last requests.
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      for (const [name, server] of servers) {
        memory[name]!.settled = treeMemory(server.pid);
        log(`  ${name} ${SETTLE_MS / 1000} s after the load: ${mib(memory[name]!.settled)}`);
      }
    },
  });
  result.extra = { memory, models: count };
  const pss = (name: string) => memory[name]?.settled?.pssBytes ?? NaN;
  result.headline = [
    { what: `MLServer / Shoal memory (PSS of the process tree, ${count} models, ${SETTLE_MS / 1000} s after the load)`, value: pss("mlserver") / pss("shoal"), goal: 2, unit: "x", note: "goal: Shoal well below MLServer, read as at most half" },
    { what: "Shoal / MLServer peak req/s", value: peakRps(result, "shoal") / peakRps(result, "mlserver"), goal: 1, unit: "x" },
  ];
  report(ctx, result, [
    "## Memory",
    "",
    "Resident memory of the whole process tree of each server (the main process and every worker), from `/proc`: PSS (`smaps_rollup`, shared pages divided among the processes sharing them) and the sum of RSS (shared pages counted once per process).",
    "",
    ...Object.entries(memory).flatMap(([name, m]) => [`- **${name}**: ${count} models loaded, before any load: ${mib(m.loaded)}; at the end of the load: ${mib(m.afterLoad)}; ${SETTLE_MS / 1000} s later: ${mib(m.settled)}`]),
    "",
  ]);
}

export const scenario: Scenario = {
  name: "multimodel",
  summary: "20 small ONNX models on a shared pool of 2 workers: Shoal's --model-repository against MLServer, memory and throughput.",
  options: { ...sweepOptions.options, models: { type: "string" } },
  help: { ...sweepOptions.help, "models <n>": "how many models to load (default 20)" },
  run,
};
