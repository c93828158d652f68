/**
 * loadgen: is `shoal bench` the bottleneck? It and wrk load the same plain route (the echo
 * scenario's Shoal server: exp(x), one worker, no batching) at the same connections, in
 * alternation, round after round; medians of req/s and p99, the ratio, and the cores each load
 * generator and the server used. Two layouts: `shared` (nothing pinned, as a user runs it on the
 * server's machine) and `pinned` (the server on one core, the load generator on the other).
 * Each round waits for the machine to be quiet first (other processes under 0.3 cores, 2 minutes
 * at most), and the two tools of a round run back to back: the ratio is taken per round.
 */
import { spawn } from "node:child_process";
import { cpuMeter, gitState, hasTaskset, machineInfo, pinned, shownCommand, waitQuiet, type CpuSet } from "../lib/machine.js";
import { nodeVersions } from "../lib/peers.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, textTable, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer } from "../lib/server.js";
import { median } from "../lib/stats.js";
import { requireWrk, runWrk, wrkVersion } from "../lib/wrk.js";

export const defaults = { duration: 6, rounds: 5, warmup: 3 };

const BODY = '{"x": 2}';
const TOOLS = ["wrk", "shoal bench"] as const;
type Tool = (typeof TOOLS)[number];

interface Point {
  layout: string;
  tool: Tool;
  round: number;
  requestsPerSec: number;
  p99Ms: number;
  /** Cores the load generator and the server used while it ran. */
  generatorCores: number;
  serverCores: number;
  /** Cores other processes used just before the round. */
  busyBefore: number;
  command: string;
}

// Runs `file args` to its end; resolves with its stdout and the cores it used over its first `seconds` (the load).
function runMeasured(file: string, args: string[], cwd: string, seconds: number, serverPid: number): Promise<{ stdout: string; generatorCores: number; serverCores: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c));
    child.stderr.on("data", (c: Buffer) => (stderr += c));
    // Measured from a second in (start-up and the first request) to just before the end.
    let use = { generatorCores: NaN, serverCores: NaN };
    setTimeout(() => {
      const generator = cpuMeter(child.pid!);
      const server = cpuMeter(serverPid);
      setTimeout(() => (use = { generatorCores: generator.stop().total, serverCores: server.stop().total }), (seconds - 1.5) * 1000);
    }, 1000);
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve({ stdout, ...use }) : reject(new Error(`${file} ${args.join(" ")} exited with ${code}: ${stderr}`))));
  });
}

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { common, root, log } = ctx;
  const connections = Number(ctx.values.connections ?? 64);
  const layouts: [string, CpuSet | undefined, CpuSet | undefined][] = [["shared", undefined, undefined]];
  if (hasTaskset()) layouts.push(["pinned", [0], [1]]);
  const points: Point[] = [];
  const commands: Record<string, string[]> = {};
  for (const [layout, serverCpus, loadCpus] of layouts) {
    const server = await startServer({
      name: "shoal",
      script: "bench/servers/shoal-exp.ts",
      args: ["--num", "1", "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"],
      port: await freePort(),
      cwd: root,
      cpus: serverCpus,
      probe: { path: "/inference", body: BODY },
    });
    const url = `${server.url}/inference`;
    try {
      commands[`server (${layout})`] = [server.command];
      const wrk = (seconds: number) => runWrk({ url, connections, durationSec: seconds, script: "bench/lua/post-json.lua", cwd: root, env: { WRK_BODY: BODY }, cpus: loadCpus });
      // Three windows of a third each: what the run measures is as long as wrk's.
      const [file, args] = pinned(loadCpus, process.execPath, ["dist/cli/main.js", "bench", url, "--body", BODY, "--concurrency", String(connections), "--window", String(common.durationSec / 3), "--max-windows", "3", "--no-metrics", "--json", "-"]);
      log(`${layout}: warm-up (${common.warmupSec} s)`);
      await wrk(common.warmupSec);
      for (let round = 1; round <= common.rounds; round++) {
        const { busy: busyBefore } = await waitQuiet(0.3, 120);
        for (const tool of round % 2 === 1 ? TOOLS : [...TOOLS].reverse()) {
          let point: Point;
          if (tool === "wrk") {
            const meter = cpuMeter(server.pid);
            const r = await wrk(common.durationSec);
            point = { layout, tool, round, requestsPerSec: r.requestsPerSec, p99Ms: r.latency.p99, generatorCores: NaN, serverCores: meter.stop().total, busyBefore, command: r.command };
            // wrk's own CPU: its process is gone by now; measured apart, below.
          } else {
            const r = await runMeasured(file, args, root, common.durationSec, server.pid);
            const json = JSON.parse(r.stdout) as { results: { requestsPerSec: number; p99Ms: number }[] };
            point = { layout, tool, round, requestsPerSec: json.results[0]!.requestsPerSec, p99Ms: json.results[0]!.p99Ms, generatorCores: r.generatorCores, serverCores: r.serverCores, busyBefore, command: shownCommand([file, ...args], root) };
          }
          points.push(point);
          commands[`${tool} (${layout})`] ??= [point.command];
          log(`  ${layout} round ${round} ${tool.padEnd(11)} ${fmtInt(point.requestsPerSec)} req/s  p99 ${fmtMs(point.p99Ms)} ms  server ${point.serverCores} cores${Number.isFinite(point.generatorCores) ? `  load generator ${point.generatorCores} cores` : ""}  (others ${busyBefore} cores before)`);
        }
      }
      // wrk's own CPU, over one more run of it.
      const [wfile, wargs] = pinned(loadCpus, "wrk", ["-t1", `-c${connections}`, `-d${common.durationSec}s`, "-s", "bench/lua/post-json.lua", url]);
      const w = await runMeasured(wfile, wargs, root, common.durationSec, server.pid);
      points.filter((p) => p.layout === layout && p.tool === "wrk").forEach((p) => (p.generatorCores = w.generatorCores));
    } finally {
      await server.stop();
    }
  }
  const headers = ["layout", "tool", "req/s (median)", "p99 ms", "ratio to wrk (median of rounds)", "load generator cores", "server cores", "rounds"];
  const rows = layouts.flatMap(([layout]) =>
    TOOLS.map((tool) => {
      const of = points.filter((p) => p.layout === layout && p.tool === tool);
      const wrkOf = (round: number) => points.find((p) => p.layout === layout && p.tool === "wrk" && p.round === round)!.requestsPerSec;
      const rps = median(of.map((p) => p.requestsPerSec));
      return [layout, tool, fmtInt(rps), fmtMs(median(of.map((p) => p.p99Ms))), median(of.map((p) => p.requestsPerSec / wrkOf(p.round))).toFixed(2), median(of.map((p) => p.generatorCores)).toFixed(2), median(of.map((p) => p.serverCores)).toFixed(2), of.map((p) => fmtInt(p.requestsPerSec)).join(" ")];
    }),
  );
  const align = ["l", "l", "r", "r", "r", "r", "r", "l"] as const;
  log("\n" + textTable(headers, rows, align));
  const date = new Date().toISOString();
  const invocation = `npm run bench -- ${process.argv.slice(2).join(" ")}`;
  const machine = machineInfo(wrkVersion());
  const git = gitState(root);
  const md = [
    ...reportHeader(`loadgen: shoal bench against wrk, ${connections} connections`, { invocation, date, git, machine }),
    markdownTable(headers, rows, align),
    "",
    "Commands:",
    "",
    ...Object.entries(commands).map(([k, v]) => `- ${k}: \`${v.join(" ")}\``),
    "",
  ].join("\n");
  const files = writeResults(ctx.resultsDir, "loadgen", { scenario: "loadgen", date, invocation, machine, git, versions: nodeVersions(root), connections, points, commands }, md);
  log(`wrote ${files.md}`);
}

export const scenario: Scenario = {
  name: "loadgen",
  summary: "shoal bench against wrk on the same plain route: is the load generator the bottleneck?",
  options: { connections: { type: "string" } },
  help: { connections: "connections of both load generators (default 64)" },
  run,
};
