/**
 * chaos: requests at many connections while workers die. For each isolation (threads, then
 * processes) it starts bench/servers/chaos-server.ts (a two-stage pipeline, and a model on the
 * shared pool), sends `--requests` requests over `--connections` kept-alive connections, a share
 * of them malformed and a share abandoned by their client (mid-body, or before the answer), and
 * kills a worker every `--kill-every` ms: a process worker with SIGKILL, a thread from inside
 * with `process.exit()` (a request that asks for it; a signal cannot reach one thread).
 *
 * It checks that every request the client did not abandon got exactly one answer (the one with
 * its x-request-id, and right when it is a 200), that afterwards the server is the same process,
 * ready, with nothing in flight or queued, and that no worker process is left over, during the
 * run or after the server stops. Results go to bench/results/chaos.{json,md}; it exits 1 when a
 * check fails.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { descendants } from "../lib/proctree.js";
import { fmtInt, markdownTable, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { KeepAliveConnection, requestBytes, type RawResponse } from "../../test/fuzz/raw-http.js";
import { Random } from "../../test/fuzz/random.js";
import { within } from "../../test/fuzz/within.js";
import { processAlive } from "../../test/helpers.js";

export const defaults = { duration: 10, rounds: 1, warmup: 0 };

type Isolation = "thread" | "process";

interface Settings {
  requests: number;
  connections: number;
  malformed: number;
  abandon: number;
  killEveryMs: number;
  /** Requests sent per second at most, so that the run lasts long enough for several kills. */
  rate: number;
  seed: number;
  isolations: Isolation[];
}

/** One request of the run, and how to tell a right answer. */
interface ChaosRequest {
  id: string;
  bytes: Buffer;
  /** How many bytes to send before hanging up, when the client abandons it mid-body. */
  cutAt: number | undefined;
  /** Hang up this many ms after sending, when the client abandons it before the answer. */
  hangUpAfterMs: number | undefined;
  /** What is wrong with a 200 answer's body, if anything. */
  check(body: Buffer): string | undefined;
}

/** What one isolation's run saw. */
interface ChaosResult {
  isolation: Isolation;
  requests: number;
  answered: number;
  abandoned: number;
  byStatus: Record<string, number>;
  kills: number;
  restarts: number;
  /** The longest time each stage and model (`stage="…"`, `model="…"`) had no live worker during the run, in ms. */
  withoutWorkerMs: Record<string, number>;
  elapsedSec: number;
  /** Every check that failed, with the requests that show it. */
  failures: string[];
}

const STAGE = "/chaos/work";
const MODEL = "/v2/models/double/infer";

/** Request `index`: its target, whether it is malformed, whether its client gives up on it. */
function makeRequest(s: Settings, isolation: Isolation, index: number): ChaosRequest {
  const r = Random.of(s.seed, index);
  const id = `chaos-${isolation}-${index}`;
  const malformed = r.chance(s.malformed);
  let path: string;
  let body: string;
  let check: ChaosRequest["check"];
  if (r.chance(0.65)) {
    const x = r.int(-1000, 1000);
    path = STAGE;
    body = malformed ? r.pick([`{"x": "${x}"}`, `{"x": ${x}`, "[]", `{"y": ${x}}`, "null", "\u00ff"]) : `{"x": ${x}}`;
    check = (b) => (JSON.parse(b.toString()).y === x * x ? undefined : `expected y = ${x * x}, got ${b}`);
  } else {
    const xs = Array.from({ length: r.int(1, 4) }, () => r.int(-100, 100));
    path = MODEL;
    const shape = malformed && r.chance(0.5) ? xs.length + 1 : xs.length;
    body = malformed && shape === xs.length ? `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [${shape}], "data": [${xs}]` : `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [${shape}], "data": [${xs}]}]}`;
    check = (b) => {
      const data = JSON.parse(b.toString()).outputs?.[0]?.data as number[] | undefined;
      return data !== undefined && data.length === xs.length && data.every((y, i) => y === 2 * xs[i]!) ? undefined : `expected y = ${xs.map((x) => 2 * x)}, got ${b}`;
    };
  }
  const bytes = requestBytes("POST", path, { "content-type": "application/json", "x-request-id": id }, Buffer.from(body));
  const abandon = r.chance(s.abandon);
  const midBody = abandon && r.chance(0.4);
  return { id, bytes, check, cutAt: midBody ? bytes.length - r.int(1, Math.min(8, body.length)) : undefined, hangUpAfterMs: abandon && !midBody ? r.int(0, 30) : undefined };
}

/** The kill requests for threads: each ends the worker of a stage, or a model host, from inside. */
const THREAD_KILLS = [
  { path: STAGE, body: '{"x": 1, "exit": "parse"}' },
  { path: STAGE, body: '{"x": 1, "exit": "compute"}' },
  { path: MODEL, body: '{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}], "parameters": {"exit": true}}' },
];

async function metricsText(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
}

/** The sum of a metric's series (0 when it has none). */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) sum += Number(m[1]);
  return sum;
}

/**
 * Scrapes `shoal_stage_live_workers` every 100 ms until stopped; resolves with the longest time
 * each series (a stage, a model) stayed at 0, in ms.
 */
function watchOutages(url: string): { stop(): Promise<Record<string, number>> } {
  const longest: Record<string, number> = {};
  const downSince = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      const now = performance.now();
      try {
        for (const m of (await metricsText(url)).matchAll(/^shoal_stage_live_workers\{([^}]*)\} (\S+)$/gm)) {
          const series = m[1]!;
          if (Number(m[2]) > 0) downSince.delete(series);
          else {
            const since = downSince.get(series) ?? now;
            downSince.set(series, since);
            longest[series] = Math.max(longest[series] ?? 0, now - since);
          }
        }
      } catch {
        // A scrape that failed shows nothing; the next one will.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return longest;
    },
  };
}

// The server's worker processes: its descendants that run the worker entry (not, say, the
// esbuild service a TypeScript loader starts).
function workerPids(serverPid: number): number[] {
  return descendants(serverPid).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").includes("process-main");
    } catch {
      return false;
    }
  });
}

/** Resolves when `promise` settles or `ms` have passed, whichever is first. */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise.then(() => {}), new Promise<void>((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}

// A repository with one model, `double`, whose runtime re-exports bench/servers/chaos-model.ts.
function writeRepository(root: string): string {
  const dir = mkdtempSync(join(tmpdir(), "shoal-chaos-"));
  mkdirSync(join(dir, "double"));
  writeFileSync(join(dir, "double", "double.mts"), `export { default } from ${JSON.stringify(join(root, "bench", "servers", "chaos-model.ts"))};\n`);
  const settings = { name: "double", runtime: "./double.mts", maxBatchSize: 8, maxWaitMs: 2, replicas: 2, inputs: [{ name: "x", datatype: "FP32", shape: [-1] }] };
  writeFileSync(join(dir, "double", "model-settings.json"), JSON.stringify(settings));
  return dir;
}

async function runIsolation(ctx: ScenarioContext, s: Settings, isolation: Isolation): Promise<ChaosResult> {
  const repo = writeRepository(ctx.root);
  const port = await freePort();
  const failures: string[] = [];
  const fail = (what: string) => {
    if (failures.length < 50) failures.push(what);
  };
  let server: RunningServer | undefined;
  try {
    server = await startServer({
      name: `shoal-${isolation}`,
      script: "bench/servers/chaos-server.ts",
      args: ["--port", "{port}", "--grpc-port", "0", "--address", "127.0.0.1", "--model-repository", repo, "--workers", "2", "--model-isolation", isolation, "--timeout", "5000", "--log-level", "warn", "--log-format", "json"],
      port,
      cwd: ctx.root,
      env: { CHAOS_ISOLATION: isolation },
      probe: { path: STAGE, body: '{"x": 2}' },
      startTimeoutMs: 60_000,
    });
    const url = server.url;
    const notReady = await within(60_000, async () => ((await fetch(`${url}/readyz`)).status === 200 ? undefined : "/readyz is not 200"));
    if (notReady !== undefined) throw new Error(`the chaos server did not become ready: ${notReady}`);
    const pid = server.pid;
    // Stages: 2 workers each; the shared pool: 2.
    const expectedWorkers = isolation === "process" ? 6 : 0;
    const seenPids = new Set<number>(workerPids(pid));
    if (seenPids.size !== expectedWorkers) fail(`at start ${seenPids.size} worker processes, expected ${expectedWorkers}`);

    // The killer: one worker every killEveryMs while requests flow.
    const killRandom = new Random(s.seed ^ 0x5eed);
    let kills = 0;
    const killer = setInterval(() => {
      kills++;
      if (isolation === "process") {
        const pids = workerPids(pid);
        for (const p of pids) seenPids.add(p);
        if (pids.length > 0) {
          try {
            process.kill(killRandom.pick(pids), "SIGKILL");
          } catch {
            // gone already
          }
        }
      } else {
        const kill = killRandom.pick(THREAD_KILLS);
        fetch(`${url}${kill.path}`, { method: "POST", body: kill.body, headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(30_000) }).then(
          (res) => res.arrayBuffer(),
          (err: Error) => fail(`a kill request got no answer: ${err.message}`),
        );
      }
    }, s.killEveryMs);

    const outages = watchOutages(url);
    const byStatus: Record<string, number> = {};
    let answered = 0;
    let abandoned = 0;
    let unsolicited = 0;
    let next = 0;
    const start = performance.now();
    const lane = async () => {
      let conn = new KeepAliveConnection(port);
      const renew = () => {
        unsolicited += conn.unsolicited;
        conn.destroy();
        conn = new KeepAliveConnection(port);
      };
      while (next < s.requests) {
        const index = next++;
        const due = start + (index * 1000) / s.rate - performance.now();
        if (due > 0) await new Promise((r) => setTimeout(r, due));
        const req = makeRequest(s, isolation, index);
        if (req.cutAt !== undefined) {
          await conn.sendPart(req.bytes.subarray(0, req.cutAt));
          await new Promise((r) => setTimeout(r, 5));
          abandoned++;
          renew();
          continue;
        }
        let response: RawResponse | undefined;
        let error: string | undefined;
        const sent = conn.send({ bytes: req.bytes }).then(
          (r) => (response = r),
          (err: Error) => (error = err.message),
        );
        if (req.hangUpAfterMs !== undefined) {
          await settledWithin(sent, req.hangUpAfterMs);
          if (response === undefined && error === undefined) {
            abandoned++;
            renew();
            continue;
          }
        }
        await settledWithin(sent, 30_000);
        if (response === undefined) {
          fail(`${req.id}: no answer (${error ?? "none within 30 s"})`);
          byStatus["no answer"] = (byStatus["no answer"] ?? 0) + 1;
          renew();
          continue;
        }
        answered++;
        const status = response.status;
        byStatus[status] = (byStatus[status] ?? 0) + 1;
        if (response.headers["x-request-id"] !== req.id) fail(`${req.id}: answered with the x-request-id of another request (${response.headers["x-request-id"]})`);
        else if (status === 200) {
          let wrong: string | undefined;
          try {
            wrong = req.check(response.body);
          } catch (err) {
            wrong = (err as Error).message;
          }
          if (wrong !== undefined) fail(`${req.id}: a wrong 200: ${wrong}`);
        } else if (status >= 500 && status !== 503 && !/^\{"error":"worker died/.test(response.body.toString())) fail(`${req.id}: ${status} ${response.body.toString().slice(0, 200)}`);
        if (conn.closed || /close/i.test(response.headers.connection ?? "")) renew();
      }
      // A second answer to the last request would arrive now.
      await new Promise((r) => setTimeout(r, 200));
      unsolicited += conn.unsolicited;
      conn.close();
    };
    await Promise.all(Array.from({ length: s.connections }, lane));
    clearInterval(killer);
    const withoutWorkerMs = await outages.stop();
    const elapsedSec = (performance.now() - start) / 1000;
    if (unsolicited > 0) fail(`${unsolicited} answers (or bytes) arrived that no request was waiting for: a request answered twice`);

    // Afterwards: the same process, ready, nothing in flight or queued, the right workers.
    if (!processAlive(pid)) fail("the server process is gone");
    const checks: [string, number, () => Promise<string | undefined>][] = [
      ["ready", 30_000, async () => ((await fetch(`${url}/readyz`)).status === 200 ? undefined : "/readyz is not 200")],
      ["nothing in flight or queued", 10_000, async () => {
        const text = await metricsText(url);
        const inFlight = metricSum(text, "shoal_requests_in_flight");
        const queued = metricSum(text, "shoal_stage_queue_depth");
        return inFlight === 0 && queued === 0 ? undefined : `shoal_requests_in_flight ${inFlight}, shoal_stage_queue_depth ${queued}`;
      }],
      ["the right worker processes", 30_000, async () => {
        const pids = workerPids(pid);
        for (const p of pids) seenPids.add(p);
        return pids.length === expectedWorkers ? undefined : `${pids.length} worker processes, expected ${expectedWorkers}`;
      }],
    ];
    for (const [what, ms, check] of checks) {
      const wrong = await within(ms, check);
      if (wrong !== undefined) fail(`afterwards, not ${what} within ${ms / 1000} s: ${wrong}`);
    }
    const restarts = metricSum(await metricsText(url), "shoal_stage_worker_restarts_total");
    await server.stop();
    server = undefined;
    const leftOver = await within(5000, async () => {
      const living = [...seenPids].filter(processAlive);
      return living.length === 0 ? undefined : `worker processes ${living.join(", ")} outlived the server`;
    });
    if (leftOver !== undefined) fail(leftOver);
    return { isolation, requests: s.requests, answered, abandoned, byStatus, kills, restarts, withoutWorkerMs, elapsedSec, failures };
  } finally {
    await server?.stop();
    rmSync(repo, { recursive: true, force: true });
  }
}

function settingsOf(ctx: ScenarioContext): Settings {
  const v = ctx.values;
  const num = (name: string, fallback: number, ok: (n: number) => boolean) => {
    const raw = v[name] as string | undefined;
    const n = raw === undefined ? fallback : Number(raw);
    if (!ok(n)) throw new Error(`--${name}: '${raw}' is out of range`);
    return n;
  };
  const isolations = ((v.isolation as string | undefined) ?? "thread,process").split(",") as Isolation[];
  if (isolations.some((i) => i !== "thread" && i !== "process")) throw new Error("--isolation takes thread, process or both");
  return {
    requests: num("requests", 10_000, (n) => Number.isInteger(n) && n > 0),
    connections: num("connections", 64, (n) => Number.isInteger(n) && n > 0),
    malformed: num("malformed", 0.3, (n) => n >= 0 && n <= 1),
    abandon: num("abandon", 0.1, (n) => n >= 0 && n <= 1),
    killEveryMs: num("kill-every", 2000, (n) => n >= 50),
    rate: num("rate", 500, (n) => n > 0),
    seed: num("seed", 1, (n) => Number.isInteger(n)),
    isolations,
  };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const s = settingsOf(ctx);
  const results: ChaosResult[] = [];
  for (const isolation of s.isolations) {
    ctx.log(`${isolation} workers: ${s.requests} requests at ${s.connections} connections, ${s.malformed * 100} % malformed, ${s.abandon * 100} % abandoned, a worker killed every ${s.killEveryMs} ms, at most ${s.rate} requests/s`);
    const result = await runIsolation(ctx, s, isolation);
    results.push(result);
    const statuses = Object.entries(result.byStatus).map(([k, n]) => `${k}: ${n}`).join(", ");
    ctx.log(`${isolation}: ${result.answered} answered, ${result.abandoned} abandoned, ${result.kills} kills, ${result.restarts} restarts, longest without a live worker ${longestOutage(result.withoutWorkerMs)}, in ${result.elapsedSec.toFixed(1)} s (${statuses})`);
    for (const f of result.failures) ctx.log(`  FAIL ${f}`);
  }
  const rows = results.map((r) => [
    r.isolation,
    fmtInt(r.requests),
    fmtInt(r.answered),
    fmtInt(r.abandoned),
    Object.entries(r.byStatus).map(([k, n]) => `${k}: ${n}`).join(", "),
    String(r.kills),
    String(r.restarts),
    longestOutage(r.withoutWorkerMs),
    r.elapsedSec.toFixed(1),
    r.failures.length === 0 ? "pass" : `FAIL (${r.failures.length})`,
  ]);
  const md = [
    "# chaos",
    "",
    `Generated by \`npm run bench -- chaos\` on ${new Date().toISOString()}: ${s.requests} requests per isolation at ${s.connections} connections, ${s.malformed * 100} % malformed, ${s.abandon * 100} % abandoned by their client, a worker killed every ${s.killEveryMs} ms, at most ${s.rate} requests/s, seed ${s.seed}. See docs/reliability.md.`,
    "",
    markdownTable(["workers", "requests", "answered", "abandoned", "answers by status", "kills", "restarts", "longest without a live worker", "seconds", "checks"], rows, ["l", "r", "r", "r", "l", "r", "r", "l", "r", "l"]),
    "",
    ...results.flatMap((r) => (r.failures.length === 0 ? [] : [`## Failures (${r.isolation})`, "", ...r.failures.map((f) => `- ${f}`), ""])),
  ].join("\n");
  const paths = writeResults(ctx.resultsDir, "chaos", { settings: s, results }, md);
  ctx.log(`wrote ${paths.md}`);
  if (results.some((r) => r.failures.length > 0)) throw new Error("chaos: a check failed (see above)");
}

// "1.2 s (stage=\"Parse_1\")": the longest a stage or model had no live worker, and which.
function longestOutage(withoutWorkerMs: Record<string, number>): string {
  const [series, ms] = Object.entries(withoutWorkerMs).reduce((a, b) => (b[1] > a[1] ? b : a), ["", 0]);
  return ms === 0 ? "never" : `${(ms / 1000).toFixed(1)} s (${series})`;
}

export const scenario: Scenario = {
  name: "chaos",
  summary: "Requests at many connections, malformed and abandoned ones among them, while a worker is killed every 2 s; checks every request is answered once and nothing is left over.",
  options: {
    requests: { type: "string" },
    connections: { type: "string" },
    malformed: { type: "string" },
    abandon: { type: "string" },
    "kill-every": { type: "string" },
    rate: { type: "string" },
    isolation: { type: "string" },
    seed: { type: "string" },
  },
  help: {
    "requests <n>": "requests per isolation (default 10000)",
    "connections <n>": "kept-alive connections (default 64)",
    "malformed <share>": "share of malformed bodies, 0..1 (default 0.3)",
    "abandon <share>": "share of requests the client hangs up on, mid-body or before the answer (default 0.1)",
    "kill-every <ms>": "kill a worker this often (default 2000)",
    "rate <n>": "requests sent per second at most, so the run spans several kills (default 500: 20 s for 10,000)",
    "isolation <list>": "thread, process, or thread,process (default both)",
    "seed <n>": "seed of the requests and of which worker is killed (default 1)",
  },
  run,
};
