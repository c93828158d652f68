/**
 * The fuzz run: starts the fuzz server (test/fixtures/fuzz-server.ts over a model repository
 * written for it), sends it generated requests, judges every answer (verdict.ts), makes a tenth
 * as many gRPC calls (grpc.ts), then checks the server is the same process, ready, has nothing in
 * flight and still answers each route, over HTTP and gRPC.
 *
 * As a command (`npm run fuzz -- [flags]`):
 *   --count N         requests to send (default 20,000)
 *   --seed S          the run's seed (default 1); the same seed sends the same requests
 *   --concurrency C   requests in flight, each on a kept-alive socket (default 24)
 *   --only I,J,...    send only these requests of the run (to reproduce a finding)
 * It prints counts by status and kind, each kind of failure with requests that show it, and
 * exits 1 when there is a failure.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Packr } from "msgpackr";
import { fixture, startServer, type ServerProcess } from "../helpers.js";
import { freePort, V2Client } from "../grpc-helpers.js";
import { ModelRepo } from "../model-helpers.js";
import { fuzzAgent, send, sendAll, type Outcome } from "./client.js";
import { describeGrpcRun, runGrpcFuzz } from "./grpc.js";
import { describeGrpcResourceRun, runGrpcResourceFuzz } from "./grpc-resources.js";
import { generate, STAGE_ROUTES, type FuzzTarget } from "./requests.js";
import { describeRequest, Findings, judge, Tally } from "./verdict.js";
import { within } from "./within.js";

/** The admin token and allowed origin the fuzz server is started with. */
export const FUZZ_TARGET: FuzzTarget = { adminToken: "fuzz-admin-token-0123456789", allowedOrigin: "https://ok.example" };

/** The fuzz server, its repository, and the pid it started with. */
export interface FuzzServer {
  server: ServerProcess;
  /** The port of its V2 gRPC service. */
  grpcPort: number;
  repo: ModelRepo;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Writes the repository (an ONNX MLP in versions 1 and 2, FP32 [N, 4] to [N, 3]; `upper`, a
 * module runtime with BYTES tensors; `misfit`, a module runtime that streams a chunk no JSON can
 * hold after one it can) and starts the fuzz server over it, with control open to the admin token
 * and one allowed origin.
 */
export async function startFuzzServer(extraArgs: string[] = []): Promise<FuzzServer> {
  const repo = new ModelRepo();
  const grpcPort = await freePort();
  for (const version of ["1", "2"]) repo.mlp("mlp", version, { inputs: 4, hidden: 8, layers: 1, outputs: 3, seed: Number(version) });
  repo.settings("mlp", { name: "mlp", runtime: "onnx", maxBatchSize: 8, maxWaitMs: 2 });
  repo.settings("upper", {
    name: "upper",
    runtime: "./upper.mts",
    inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
    outputs: [
      { name: "upper", datatype: "BYTES", shape: [-1] },
      { name: "length", datatype: "INT32", shape: [-1] },
    ],
  });
  // The runtime lives in the model's folder; it re-exports the fixture, which finds `shoal` from
  // inside the project.
  writeFileSync(join(repo.dir, "upper", "upper.mts"), `export { default } from ${JSON.stringify(fixture(join("models", "upper.ts")))};\n`);
  repo.settings("misfit", { name: "misfit", runtime: "./misfit.mts" });
  writeFileSync(join(repo.dir, "misfit", "misfit.mts"), `export { default } from ${JSON.stringify(fixture(join("models", "misfit.ts")))};\n`);
  const args = [
    "--model-repository", repo.dir, "--workers", "2", "--model-control", "explicit", "--admin-token", FUZZ_TARGET.adminToken,
    "--cors-origins", FUZZ_TARGET.allowedOrigin, "--control-timeout", "10000", "--dashboard", "--log-format", "json", "--grpc-port", String(grpcPort), ...extraArgs,
  ];
  let server: ServerProcess;
  try {
    server = await startServer(fixture("fuzz-server.ts"), { args, startTimeoutMs: 90_000 });
  } catch (err) {
    repo.remove();
    throw err;
  }
  return {
    server,
    grpcPort,
    repo,
    pid: server.proc.pid!,
    async stop() {
      await server.stop();
      repo.remove();
    },
  };
}

export interface FuzzOptions {
  port: number;
  seed: number;
  count: number;
  /** Requests in flight at once (and sockets of the agent). */
  concurrency: number;
  /** How long a request may wait for its answer before it counts as unanswered, in ms. */
  timeoutMs: number;
  /** Send only these indexes of the run. */
  only?: number[];
  /** Progress lines, every few seconds. */
  progress?: (line: string) => void;
}

export interface FuzzResult {
  tally: Tally;
  findings: Findings;
  elapsedMs: number;
}

/** Sends the run's requests and judges each answer. */
export async function runFuzz(o: FuzzOptions): Promise<FuzzResult> {
  const agent = fuzzAgent(o.concurrency);
  const tally = new Tally();
  const findings = new Findings();
  const indexes = o.only ?? Array.from({ length: o.count }, (_, i) => i);
  const start = performance.now();
  const ticker = o.progress === undefined ? undefined : setInterval(() => o.progress!(`${tally.count} / ${indexes.length} sent, ${Math.round(tally.count / ((performance.now() - start) / 1000))} req/s, ${findings.total} failing`), 5000);
  try {
    await sendAll(
      indexes.length,
      o.concurrency,
      (i) => generate(o.seed, indexes[i]!, FUZZ_TARGET),
      (req) => send(o.port, agent, req, o.timeoutMs),
      (outcome: Outcome) => {
        tally.add(outcome);
        const problem = judge(outcome);
        if (problem !== undefined) findings.add(problem, outcome);
      },
    );
  } finally {
    clearInterval(ticker);
    agent.destroy();
  }
  return { tally, findings, elapsedMs: performance.now() - start };
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** One request per stage route and model that must answer 200 on a healthy server. */
const HEALTHY: { path: string; body: Uint8Array | string; type: string; headers?: Record<string, string> }[] = [
  { path: STAGE_ROUTES.json, body: '{"a": [1, 2, {"b": null}]}', type: "application/json" },
  { path: STAGE_ROUTES.msgpack, body: packr.pack({ tag: "t", values: [1, 2], blob: Uint8Array.of(1, 2, 3) }), type: "application/msgpack" },
  { path: STAGE_ROUTES.bytes, body: "abc", type: "application/octet-stream" },
  { path: STAGE_ROUTES.batch, body: '{"x": 1.5}', type: "application/json" },
  { path: STAGE_ROUTES.typed, body: '{"name": "n", "points": [{"x": 0, "y": 0}, {"x": 3, "y": 4}]}', type: "application/json" },
  { path: STAGE_ROUTES.pipeline, body: '{"n": 4}', type: "application/json" },
  { path: STAGE_ROUTES.buggy, body: '{"a": {"b": "xy"}}', type: "application/json" },
  { path: STAGE_ROUTES.fanout, body: '{"text": "a b c"}', type: "application/json" },
  { path: STAGE_ROUTES.stream, body: '{"n": 3}', type: "application/json", headers: { accept: "text/event-stream" } },
  { path: STAGE_ROUTES.stream, body: '{"n": 3}', type: "application/json", headers: { accept: "application/json" } },
  { path: STAGE_ROUTES.steps, body: '{"len": 3}', type: "application/json", headers: { accept: "application/x-ndjson" } },
  { path: "/v2/models/mlp/infer", body: '{"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}', type: "application/json" },
  { path: "/v2/models/mlp/versions/1/infer", body: '{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}', type: "application/json" },
  { path: "/v2/models/upper/infer", body: '{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["ab", "c"]}]}', type: "application/json" },
  { path: "/v2/models/pipeline/infer", body: '{"inputs": [{"name": "n", "datatype": "FP32", "shape": [1], "data": [4]}]}', type: "application/json" },
];

async function fetchText(url: string, init?: RequestInit): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  return { status: res.status, text: await res.text() };
}

/**
 * What is wrong with the server after a run: a different (or no) process, not ready within
 * 30 s, requests still counted in flight after 10 s, or a route that no longer answers a good
 * request. Empty when all is well.
 */
export async function checkAfter(fuzzServer: FuzzServer): Promise<string[]> {
  const { server, pid } = fuzzServer;
  const problems: string[] = [];
  if (server.exited || server.proc.pid !== pid) return [`the server process ${pid} is gone (exit code ${await server.exitCode()})\n${server.describe()}`];
  const url = server.url;
  const settle = async (what: string, ms: number, check: () => Promise<string | undefined>) => {
    const last = await within(ms, check);
    if (last !== undefined) problems.push(`${what} within ${ms / 1000} s: ${last}`);
  };
  await settle("not ready", 30_000, async () => {
    const r = await fetchText(`${url}/readyz`);
    return r.status === 200 ? undefined : `/readyz ${r.status} ${r.text}`;
  });
  await settle("requests still in flight", 10_000, async () => {
    const text = (await fetchText(`${url}/metrics`)).text;
    const value = /^shoal_requests_in_flight (\S+)$/m.exec(text)?.[1];
    return value === "0" ? undefined : `shoal_requests_in_flight is ${value}`;
  });
  // The run may have unloaded the models: load them again, as an operator would.
  for (const model of ["mlp", "upper"]) {
    const r = await fetchText(`${url}/v2/repository/models/${model}/load`, { method: "POST", headers: { authorization: `Bearer ${FUZZ_TARGET.adminToken}` } });
    if (r.status !== 200) problems.push(`loading ${model} again: ${r.status} ${r.text}`);
  }
  for (const h of HEALTHY) {
    const r = await fetchText(`${url}${h.path}`, { method: "POST", body: h.body, headers: { "content-type": h.type, ...h.headers } });
    if (r.status !== 200) problems.push(`a good request to ${h.path} now gets ${r.status} ${r.text.slice(0, 300)}`);
  }
  const grpc = new V2Client(fuzzServer.grpcPort);
  try {
    await grpc.call("ModelInfer", { model_name: "mlp", inputs: [{ name: "input", datatype: "FP32", shape: [1, 4], contents: { fp32_contents: [1, 2, 3, 4] } }] }, { deadlineMs: 30_000 });
  } catch (err) {
    problems.push(`a good gRPC inference now fails: ${(err as Error).message}`);
  } finally {
    grpc.close();
  }
  if (server.exited || server.proc.pid !== pid) problems.push(`the server process ${pid} is gone`);
  return problems;
}

/** The run as text: counts, then each kind of failure with the requests that show it. */
export function describeRun(seed: number, result: FuzzResult): string[] {
  const { tally, findings, elapsedMs } = result;
  const lines = [
    `fuzz: seed ${seed}, ${tally.count} requests in ${(elapsedMs / 1000).toFixed(1)} s (${Math.round(tally.count / (elapsedMs / 1000))} req/s), ${findings.total} failing in ${findings.size} kinds${tally.unsent > 0 ? `, ${tally.unsent} the client would not send` : ""}`,
    ...tally.lines(),
  ];
  for (const f of findings.list()) {
    lines.push(`FAIL ${f.problem} (${f.count}x)`);
    for (const o of f.examples) lines.push(`  ${describeRequest(o.request)}`, `    -> ${o.status ?? "no answer"} ${o.error ?? o.body.toString("utf8").slice(0, 300)} (after ${Math.round(o.ms)} ms)`, `    again: npm run fuzz -- --seed ${seed} --only ${o.request.index}`);
  }
  return lines;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { count: { type: "string" }, seed: { type: "string" }, concurrency: { type: "string" }, only: { type: "string" }, timeout: { type: "string" } },
  });
  const whole = (name: string, value: string | undefined, fallback: number) => {
    const n = value === undefined ? fallback : Number(value);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, not '${value}'`);
    return n;
  };
  const seed = whole("seed", values.seed, 1);
  const only = values.only?.split(",").map((s) => whole("only", s, 0));
  const options: Omit<FuzzOptions, "port"> = {
    seed,
    count: whole("count", values.count, 20_000),
    concurrency: whole("concurrency", values.concurrency, 24),
    timeoutMs: whole("timeout", values.timeout, 15_000),
    only,
    progress: (line) => process.stderr.write(`fuzz: ${line}\n`),
  };
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const fuzzServer = await startFuzzServer();
  let failed = false;
  try {
    if (only !== undefined) for (const i of only) log(describeRequest(generate(seed, i, FUZZ_TARGET)));
    const result = await runFuzz({ ...options, port: fuzzServer.server.port });
    for (const line of describeRun(seed, result)) log(line);
    const grpcResult = await runGrpcFuzz(fuzzServer.grpcPort, seed, Math.ceil(options.count / 10), options.concurrency, FUZZ_TARGET.adminToken);
    for (const line of describeGrpcRun(seed, grpcResult)) log(line);
    const problems = await checkAfter(fuzzServer);
    for (const p of problems) log(`FAIL after the run: ${p}`);
    if (problems.length === 0) log("after the run: same process, ready, nothing in flight, every route answers a good request");
    // After the check, which loads again the models the run may have unloaded.
    const resources = await runGrpcResourceFuzz(fuzzServer.grpcPort, fuzzServer.server.url, fuzzServer.pid, seed);
    for (const line of describeGrpcResourceRun(seed, resources)) log(line);
    failed = result.findings.size > 0 || grpcResult.failures.size > 0 || resources.problems.length > 0 || problems.length > 0;
  } finally {
    await fuzzServer.stop();
  }
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    process.stderr.write(`fuzz: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 2;
  });
}
