/**
 * echo: JSON in, exp(x), JSON out. The work is nothing, so what is measured is each framework's own
 * cost per request: Shoal, Mosec, MLServer and a plain server, Shoal and the plain server on Node
 * and on Bun (when Bun is installed: bench/lib/runtimes.ts).
 *
 * Default layout pinned: every server gets one core (all its threads and processes), wrk the other;
 * so each server has one worker (bench/peers/mlserver_echo/settings.json says parallel_workers 1).
 */
import { join } from "node:path";
import { ensurePeers, mlserverSpec, mosecSpec } from "../lib/peers.js";
import { findBun, onBun } from "../lib/runtimes.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { report, rps, sweep, sweepOptions, sweepSettings, wantsPeers, type Contender } from "../lib/sweep.js";
import { requireWrk } from "../lib/wrk.js";

export const defaults = { duration: 5, rounds: 3, warmup: 3 };

const X = 2;
const expectY = (y: unknown) => (typeof y === "number" && Math.abs(y - Math.exp(X)) < 1e-9 ? undefined : `expected y = ${Math.exp(X)}, got ${JSON.stringify(y)}`);

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const s = sweepSettings(ctx, "pinned");
  const workers = "1";
  if (wantsPeers(s, ["mosec", "mlserver"])) ensurePeers(ctx.root, ctx.log);
  const json = { path: "/inference", body: `{"x": ${X}}`, check: (t: string) => expectY((JSON.parse(t) as { y?: number }).y) };
  const v2 = `{"inputs": [{"name": "x", "datatype": "FP64", "shape": [1], "data": [${X}]}]}`;
  const shoal: Contender = {
    name: "shoal",
    shoal: true,
    config: `bench/servers/shoal-exp.ts: the CalculateExp Worker, one stage, num ${workers}, no batching, --log-level warn`,
    spec: { script: "bench/servers/shoal-exp.ts", args: ["--num", workers, "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"], probe: json },
    path: "/inference",
    body: json.body,
  };
  const plain: Contender = {
    name: "plain",
    config: "bench/servers/plain-exp.ts: node:http doing the same work inline (one thread)",
    spec: { script: "bench/servers/plain-exp.ts", args: ["--port", "{port}", "--address", "127.0.0.1"], probe: json },
    path: "/inference",
    body: json.body,
  };
  const bun = findBun(ctx.root);
  const contenders: Contender[] = [
    shoal,
    onBun(shoal, bun, "the same Shoal server script run by Bun (`bun bench/servers/shoal-exp.ts`)"),
    {
      name: "mosec",
      config: `bench/peers/mosec_echo.py: Mosec's CalculateExp Worker, num ${workers}, no batching, --log-level warning`,
      spec: mosecSpec(ctx.root, "mosec_echo.py", { BENCH_NUM: workers }, json),
      path: "/inference",
      body: json.body,
    },
    {
      name: "mlserver",
      config: `bench/peers/mlserver_echo/: a custom runtime (MLModel) computing exp of a V2 request, parallel_workers ${workers}, no adaptive batching; the V2 request and response are its protocol`,
      spec: mlserverSpec(ctx.root, join("bench", "peers", "mlserver_echo"), {}, {
        path: "/v2/models/exp/infer",
        body: v2,
        check: (t) => expectY((JSON.parse(t) as { outputs?: { data?: number[] }[] }).outputs?.[0]?.data?.[0]),
      }),
      path: "/v2/models/exp/infer",
      body: v2,
    },
    plain,
    onBun(plain, bun, "bench/servers/plain-exp.ts run by Bun: `Bun.serve` doing the same work inline (one thread), Bun's ceiling"),
  ];
  const result = await sweep(ctx, "echo", "echo: exp(x), JSON in and out (framework overhead)", contenders, s);
  const at = s.connections.includes(64) ? 64 : Math.max(...s.connections);
  result.headline = [
    { what: `Shoal / Mosec req/s at ${at} connections`, value: rps(result, "shoal", at) / rps(result, "mosec", at), goal: 1, unit: "x" },
    { what: `Shoal / MLServer req/s at ${at} connections`, value: rps(result, "shoal", at) / rps(result, "mlserver", at), goal: 1, unit: "x", note: "goal: clearly above" },
    { what: `Shoal / plain node:http req/s at ${at} connections`, value: rps(result, "shoal", at) / rps(result, "plain", at), goal: 0.5, unit: "x", note: "the core benchmark's goal" },
    { what: `Shoal on Bun / Mosec req/s at ${at} connections`, value: rps(result, "shoal-bun", at) / rps(result, "mosec", at), goal: 2, unit: "x" },
    { what: `Shoal on Bun / plain Bun.serve req/s at ${at} connections`, value: rps(result, "shoal-bun", at) / rps(result, "plain-bun", at), goal: 0.5, unit: "x", note: "the core benchmark's goal, on Bun" },
    { what: `Shoal on Bun / Shoal on Node req/s at ${at} connections`, value: rps(result, "shoal-bun", at) / rps(result, "shoal", at), goal: 1, unit: "x", note: "what running on Bun gains" },
  ];
  report(ctx, result);
}

export const scenario: Scenario = {
  name: "echo",
  summary: "exp(x) over JSON: Shoal, Mosec, MLServer and a plain server, Shoal and plain on Node and on Bun, swept over concurrency (framework overhead).",
  options: sweepOptions.options,
  help: sweepOptions.help,
  run,
};
