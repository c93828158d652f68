/**
 * flood: normal clients beside attackers at the server's limits. One `shoal serve` serves an echo
 * model (test/fixtures/models/echo.ts) over REST and gRPC at once, with small limits
 * (`--max-connections`, `--headers-timeout`, `--request-timeout`, `--max-request-size`) so that
 * the attacks reach them. Two normal clients run from start to end without a pause: REST V2
 * inference over kept-alive connections and gRPC ModelInfer unary calls on one channel, each at a
 * fixed concurrency (src/bench/loadgen.ts) in a process of its own (bench/tools/flood-client.ts).
 * Each round measures them alone, and while the attackers (bench/lib/attacks.ts, in a third
 * process) hold: idle connections on both
 * ports, slow headers and never-finished bodies, gRPC calls of HEADERS only at many a connection,
 * ModelStreamInfer calls that send and never read, and gzip bodies that inflate past the limit.
 *
 * It reports each normal client's throughput under flood against alone (goal ≥ 0.95), p50/p99,
 * errors (goal 0), the server's RSS peak (all processes of its tree, from /proc, every 250 ms)
 * against `--rss-bound`, whether it stayed up and answered new clients afterwards, and the CPU of
 * every process of the run and of the rest of the machine in each window. Results go
 * to bench/results/flood.{json,md}; it exits 1 when the server died, a normal client saw an error
 * or RSS passed the bound (throughput ratios are reported, not enforced: they are timings).
 */
import { join } from "node:path";
import { ATTACKS, portOf, inferMessage, type AttackName, type AttackSettings, type AttackStats } from "../lib/attacks.js";
import { grpcSender, type LoadResult } from "../../src/bench/loadgen.js";
import { forkHelper } from "../lib/forked.js";
import { describeCpus, expandCpuList, gitState, machineBusySeconds, machineInfo, treeCpuSeconds, type CpuSet } from "../lib/machine.js";
import { alternate, disturbedBy, DISTURBED, quietOptions, quietSettings, type QuietSettings } from "../lib/measure.js";
import { treeMemory } from "../lib/proctree.js";
import { fmtInt, fmtMs, markdownTable, reportHeader, targetsAndCommands, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer } from "../lib/server.js";
import { median } from "../lib/stats.js";
import { within } from "../../test/fuzz/within.js";
import { processAlive } from "../../test/helpers.js";
import { ModelRepo } from "../../test/model-helpers.js";
import type { ClientSetup } from "../tools/flood-client.js";

export const defaults = { duration: 8, rounds: 3, warmup: 2 };

const MODEL = "echo";
const INFER = "/inference.GRPCInferenceService/ModelInfer";
/** Normal throughput under flood / alone at least this. */
const GOAL = 0.95;
const MiB = 1024 * 1024;
/** The normal REST client's request: 16 FP32. */
const x = Array.from({ length: 16 }, (_, i) => i / 16);
const json = Buffer.from(JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [16], data: x }] }));

type Phase = "alone" | "flood";
type Client = "rest" | "grpc";
/** The run's processes whose CPU is metered. */
const PARTS = ["server", "rest", "grpc", "attackers"] as const;
type Part = (typeof PARTS)[number];
/** Cores used in a window by each of them, by this process and by the rest of the machine. */
type Cores = Record<Part | "harness" | "others", number>;

/** What a flood run is set to. */
export interface Settings {
  /** Concurrent requests of the normal REST and gRPC clients. */
  connections: number;
  streams: number;
  /** The server's limits. */
  maxConnections: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxRequestSize: number;
  serverArgs: string[];
  rampSec: number;
  /** The normal clients' rate as a fraction of what they reach alone (undefined: as fast as answered). */
  pace: number | undefined;
  rssBoundMiB: number;
  /** How long to wait before each window for the rest of the machine to be quiet. */
  quiet: QuietSettings;
  /** CPUs to pin the server, the two normal clients and the attackers to (undefined: any). */
  cpus: Record<"server" | "clients" | "attackers", CpuSet | undefined>;
  attack: Omit<AttackSettings, "host" | "restPort" | "grpcPort">;
}

/** One measured window of one round. */
interface Window {
  round: number;
  phase: Phase;
  rest: LoadResult;
  grpc: LoadResult;
  /** The server's RSS peak during the window (for a flood, from the attackers' start), in MiB. */
  rssPeakMiB: number;
  cores: Cores;
  /** Windows of the same phase measured before it and dropped because other processes disturbed them. */
  discarded: number;
  /** For a flood: what each attack did, from its start to its stop. */
  attacks?: AttackStats[];
}

interface Outcome {
  settings: Settings;
  /** With --pace: the normal clients' rates, in req/s. */
  paced?: { rest: number; grpc: number };
  windows: Window[];
  /** RSS of the server before the first window and after the last, in MiB. */
  rssStartMiB: number;
  rssEndMiB: number;
  rssPeakMiB: number;
  /** Every 250 ms: seconds since the start, RSS in MiB, and the phase then. */
  samples: { t: number; rssMiB: number; phase: Phase | "between" }[];
  /** Undefined while the server lived; else when it died and its last lines. */
  died?: { atSec: number; output: string };
  /** Whether new REST and gRPC clients were answered after the flood. */
  afterwards: { rest: string | undefined; grpc: string | undefined };
  command: string;
}

/** The scenario's settings from its flags (`values` as parsed). */
export function settingsOf(ctx: Pick<ScenarioContext, "values">): Settings {
  const v = ctx.values;
  const whole = (name: string, fallback: number, min = 1) => {
    const raw = v[name] as string | undefined;
    const n = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number >= ${min}, not '${raw}'`);
    return n;
  };
  const maxConnections = whole("max-connections", 256);
  const maxRequestSize = whole("max-request-size", MiB);
  const wanted = ((v.attacks as string | undefined) ?? "all").split(",").flatMap((a) => (a === "all" ? [...ATTACKS] : a === "rest" || a === "grpc" ? ATTACKS.filter((n) => portOf(n) === a) : [a]));
  for (const a of wanted) if (!(ATTACKS as readonly string[]).includes(a)) throw new Error(`--attacks: unknown attack '${a}'; known: rest, grpc, all, ${ATTACKS.join(", ")}`);
  // The other attacks' sizes; the idle connections fill each port up to the cap, beside the normal
  // clients' connections (REST's `--connections`, gRPC's one channel): a slot more would be closed
  // at once and opened again every --reopen-ms, work for both sides that holds nothing.
  const connections = whole("connections", 8);
  const normal = { rest: connections, grpc: 1 };
  const sizes = {} as Record<AttackName, number>;
  const fallbacks: Record<AttackName, number> = { "slow-headers": 64, "slow-bodies": 64, "gzip-rest": 4, "header-only": 8, "non-reading": 8, "gzip-grpc": 4, "idle-rest": 0, "idle-grpc": 0 };
  for (const name of ATTACKS) if (!name.startsWith("idle-")) sizes[name] = wanted.includes(name) ? whole(name, fallbacks[name], 0) : 0;
  for (const [idle, port] of [["idle-rest", "rest"], ["idle-grpc", "grpc"]] as const) {
    const others = ATTACKS.filter((n) => portOf(n) === port && n !== idle).reduce((a, n) => a + sizes[n], 0);
    sizes[idle] = wanted.includes(idle) ? whole(idle, Math.max(0, maxConnections - others - normal[port]), 0) : 0;
  }
  return {
    connections,
    streams: whole("streams", 8),
    maxConnections,
    headersTimeoutMs: whole("headers-timeout", 2000),
    requestTimeoutMs: whole("request-timeout", 4000),
    maxRequestSize,
    serverArgs: ((v["server-args"] as string | undefined) ?? "").split(/\s+/).filter((a) => a !== ""),
    rampSec: whole("ramp", 3, 0),
    pace: fraction(v.pace as string | undefined),
    rssBoundMiB: whole("rss-bound", 512),
    quiet: quietSettings(v),
    cpus: { server: cpuList(v["server-cpus"] as string | undefined), clients: cpuList(v["client-cpus"] as string | undefined), attackers: cpuList(v["attacker-cpus"] as string | undefined) },
    attack: {
      model: MODEL,
      sizes,
      reopenMs: whole("reopen-ms", 100, 0),
      dripMs: whole("drip-ms", 500),
      slowBodyBytes: Math.floor(maxRequestSize / 2),
      streamsPerConnection: whole("streams-per-connection", 500),
      streamRequests: whole("stream-requests", 1000),
      streamRequestBytes: whole("stream-kb", 16) * 1024,
      gzipInflatedBytes: 4 * maxRequestSize,
      gzipEveryMs: whole("gzip-every", 100),
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fraction(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const x = Number(raw);
  if (!(x > 0 && x <= 1)) throw new Error(`--pace must be a fraction in (0, 1], not '${raw}'`);
  return x;
}

function cpuList(raw: string | undefined): CpuSet | undefined {
  if (raw === undefined) return undefined;
  const cpus = expandCpuList(raw);
  if (cpus.length === 0) throw new Error(`a CPU list is like 0 or 0,1 or 0-1, not '${raw}'`);
  return cpus;
}

// CPU seconds used so far by each process of the run (with its children and threads), by this
// process, and by the whole machine.
function cpuSeconds(pids: Partial<Record<Part, number>>): Record<Part | "harness" | "machine", number> {
  const self = process.cpuUsage();
  const out = { harness: (self.user + self.system) / 1e6, machine: machineBusySeconds() } as Record<Part | "harness" | "machine", number>;
  for (const part of PARTS) out[part] = pids[part] === undefined ? 0 : treeCpuSeconds(pids[part]);
  return out;
}

// Cores used between two readings `secs` apart; "others" is the machine's busy time that none of
// the run's processes explains.
function coresBetween(a: ReturnType<typeof cpuSeconds>, b: ReturnType<typeof cpuSeconds>, secs: number): Cores {
  const cores = {} as Cores;
  let known = 0;
  for (const part of [...PARTS, "harness"] as const) {
    known += b[part] - a[part];
    cores[part] = round2((b[part] - a[part]) / secs);
  }
  cores.others = round2(Math.max(0, (b.machine - a.machine - known) / secs));
  return cores;
}

/**
 * Starts the flood's server from the tree at `root` (its dist/): the echo model of `repo`, REST
 * and gRPC, under the settings' limits. `program` and `before` run it under another program or
 * with runtime flags before the script (a profile, for example).
 */
export async function startFloodServer(root: string, repo: ModelRepo, s: Settings, run: { program?: string; before?: string[] } = {}): Promise<{ server: RunningServer; grpcPort: number }> {
  const grpcPort = await freePort();
  const script = "dist/cli/main.js";
  const server = await startServer({
    name: "shoal",
    ...(run.program === undefined ? { script } : { program: run.program, script: run.before?.[0] ?? script }),
    args: [
      ...(run.program === undefined || run.before === undefined ? [] : [...run.before.slice(1), script]),
      "serve", "--model-repository", repo.dir, "--workers", "1", "--port", "{port}", "--grpc-port", String(grpcPort), "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json",
      "--max-connections", String(s.maxConnections), "--headers-timeout", String(s.headersTimeoutMs), "--request-timeout", String(s.requestTimeoutMs), "--max-request-size", String(s.maxRequestSize),
      ...s.serverArgs,
    ],
    port: await freePort(),
    cwd: root,
    probe: { path: `/v2/models/${MODEL}/infer`, body: json.toString() },
    startTimeoutMs: 60_000,
    cpus: s.cpus.server,
  });
  return { server, grpcPort };
}

/** The normal gRPC client of a server's gRPC port (bench/tools/flood-client.ts): ModelInfer of 16 FP32 as raw contents, `concurrency` calls at once. */
export function grpcClient(grpcPort: number, concurrency: number): Extract<ClientSetup, { kind: "grpc" }> {
  const message = inferMessage(MODEL, { datatype: "FP32", shape: [16], raw: Buffer.from(Float32Array.from(x).buffer) });
  return { kind: "grpc", target: `127.0.0.1:${grpcPort}`, method: INFER, message: message.toString("base64"), concurrency };
}

/** The flood's model repository: the echo model, batching as the scenario has it. */
export function floodRepo(): ModelRepo {
  const repo = new ModelRepo();
  repo.module(MODEL, "echo.ts", { maxBatchSize: 16, maxWaitMs: 2 });
  return repo;
}

async function measure(ctx: ScenarioContext, s: Settings): Promise<Outcome> {
  const { common, log } = ctx;
  const repo = floodRepo();
  let server: RunningServer | undefined;
  let grpcPort: number;
  try {
    ({ server, grpcPort } = await startFloodServer(ctx.root, repo, s));
    const { pid } = server;
    const t0 = performance.now();
    const samples: Outcome["samples"] = [];
    let phase: Phase | "between" = "between";
    let peak = 0;
    let died: Outcome["died"];
    const alive = () => died === undefined;
    const sampler = setInterval(() => {
      const t = (performance.now() - t0) / 1000;
      if (!processAlive(pid)) {
        died ??= { atSec: t, output: server!.output() };
        return;
      }
      const rssMiB = treeMemory(pid).rssBytes / MiB;
      peak = Math.max(peak, rssMiB);
      samples.push({ t: Math.round(t * 10) / 10, rssMiB: Math.round(rssMiB), phase });
    }, 250);
    const rssStartMiB = treeMemory(pid).rssBytes / MiB;

    const clientScript = join(ctx.root, "bench", "tools", "flood-client.ts");
    const restSetup: ClientSetup = { kind: "rest", url: `${server.url}/v2/models/${MODEL}/infer`, body: json.toString("base64"), headers: { "content-type": "application/json" }, concurrency: s.connections };
    const grpcSetup = grpcClient(grpcPort, s.streams);
    const [rest, grpc] = await Promise.all([forkHelper(ctx.root, clientScript, restSetup, s.cpus.clients), forkHelper(ctx.root, clientScript, grpcSetup, s.cpus.clients)]);
    const both = (question: "window" | "stop") => Promise.all([rest.ask<LoadResult>(question), grpc.ask<LoadResult>(question)]);
    const windows: Window[] = [];
    // Starts a window (ending the clients' last one): what it measures is read by the function returned.
    const open = async (p: Phase | "between", attackers?: number) => {
      const pids = { server: pid, rest: rest.pid, grpc: grpc.pid, attackers };
      if (p !== "between") await quietMachine(pids, s.quiet.quietWaitSec);
      phase = p;
      if (p !== "flood") peak = 0;
      await both("window");
      const cpu = cpuSeconds(pids);
      const t = performance.now();
      return async (round: number): Promise<Omit<Window, "attacks" | "discarded">> => {
        const [r, g] = await both("window");
        const cores = coresBetween(cpu, cpuSeconds(pids), (performance.now() - t) / 1000);
        return { round, phase: p as Phase, rest: r, grpc: g, rssPeakMiB: Math.round(peak), cores };
      };
    };
    log(`warming up for ${common.warmupSec} s: REST at ${s.connections} connections, gRPC at ${s.streams} streams, each client a process of its own`);
    await open("between");
    await sleep(common.warmupSec * 1000);
    let paced: Outcome["paced"];
    if (s.pace !== undefined) {
      // A window alone as fast as answered, then the clients at a share of it for the whole run.
      const close = await open("between");
      await sleep(common.durationSec * 1000);
      const w = await close(0);
      paced = { rest: Math.round(s.pace * w.rest.requestsPerSec), grpc: Math.round(s.pace * w.grpc.requestsPerSec) };
      await Promise.all([rest.ask({ pace: paced.rest }), grpc.ask({ pace: paced.grpc })]);
      log(`alone as fast as answered: REST ${fmtInt(w.rest.requestsPerSec)} req/s, gRPC ${fmtInt(w.grpc.requestsPerSec)}; from now on paced at ${s.pace} of it: ${paced.rest} and ${paced.grpc} req/s`);
      await open("between");
      await sleep(1000);
    }
    // A window of the phase, measured again while other processes disturb it (up to --retries).
    const measured = async (round: number, p: Phase, attackers?: number): Promise<Omit<Window, "attacks">> => {
      for (let attempt = 0; ; attempt++) {
        const close = await open(p, attackers);
        await sleep(common.durationSec * 1000);
        const w = { ...(await close(round)), discarded: attempt };
        if (!disturbedBy(w.cores.others) || attempt >= s.quiet.retries || !alive()) return w;
        log(`round ${round} ${p.padEnd(5)}: other processes used ${w.cores.others} cores (REST ${fmtInt(w.rest.requestsPerSec)} req/s, gRPC ${fmtInt(w.grpc.requestsPerSec)}); measuring again (${attempt + 1}/${s.quiet.retries})`);
      }
    };
    try {
      for (let round = 1; round <= common.rounds && alive(); round++) {
        for (const p of alternate<Phase>(["alone", "flood"], round)) {
          if (!alive()) break;
          if (p === "alone") windows.push(await measured(round, "alone"));
          else {
            const settings: AttackSettings = { host: "127.0.0.1", restPort: server.port, grpcPort, ...s.attack };
            const attackers = await forkHelper(ctx.root, join(ctx.root, "bench", "tools", "flood-attackers.ts"), settings, s.cpus.attackers);
            // RSS counts from the attackers' start; throughput and CPU from the end of the ramp.
            phase = "flood";
            peak = 0;
            await sleep(s.rampSec * 1000);
            const w = await measured(round, "flood", attackers.pid);
            windows.push({ ...w, attacks: await attackers.ask<AttackStats[]>("stop") });
            // Let the server close what the attackers left before the next window.
            await open("between");
            await sleep(2000);
          }
          const w = windows.at(-1)!;
          log(`round ${round} ${p.padEnd(5)}: REST ${fmtInt(w.rest.requestsPerSec)} req/s (p99 ${fmtMs(w.rest.p99Ms)} ms, ${errorsOf(w.rest)}), gRPC ${fmtInt(w.grpc.requestsPerSec)} req/s (p99 ${fmtMs(w.grpc.p99Ms)} ms, ${errorsOf(w.grpc)}), RSS peak ${w.rssPeakMiB} MiB; ${describeCores(w.cores)}`);
          for (const a of w.attacks ?? []) log(`  ${describeAttack(a)}`);
        }
      }
    } finally {
      await both("stop");
      clearInterval(sampler);
    }
    if (!processAlive(pid)) died ??= { atSec: (performance.now() - t0) / 1000, output: server.output() };
    // New clients, on new connections, once the attackers are gone.
    const url = server.url;
    const afterwards = {
      rest: await within(15_000, async () => {
        const res = await fetch(`${url}/v2/models/${MODEL}/infer`, { method: "POST", body: json, headers: { "content-type": "application/json", connection: "close" }, signal: AbortSignal.timeout(5000) });
        return res.status === 200 ? undefined : `a new REST client got ${res.status}`;
      }),
      grpc: await within(15_000, async () => {
        const fresh = grpcSender(`127.0.0.1:${grpcPort}`, INFER, Buffer.from(grpcSetup.message, "base64"));
        try {
          return (await fresh.send()) ? undefined : "a new gRPC client's call failed";
        } finally {
          fresh.close();
        }
      }),
    };
    const rssEndMiB = processAlive(pid) ? treeMemory(pid).rssBytes / MiB : NaN;
    return { settings: s, paced, windows, rssStartMiB: Math.round(rssStartMiB), rssEndMiB: Math.round(rssEndMiB), rssPeakMiB: Math.round(Math.max(...samples.map((x) => x.rssMiB), 0)), samples, died, afterwards, command: server.command };
  } finally {
    await server?.stop();
    repo.remove();
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;

const medianCores = (ws: readonly Window[], k: keyof Cores) => median(ws.map((w) => w.cores[k])).toFixed(2);

// Waits up to `maxSec` for a second in which the rest of the machine used under DISTURBED cores.
async function quietMachine(pids: Partial<Record<Part, number>>, maxSec: number): Promise<void> {
  const t0 = performance.now();
  while ((performance.now() - t0) / 1000 < maxSec) {
    const [a, t] = [cpuSeconds(pids), performance.now()];
    await sleep(1000);
    if (!disturbedBy(coresBetween(a, cpuSeconds(pids), (performance.now() - t) / 1000).others)) return;
  }
}

const describeCores = (c: Cores) => `cores: server ${c.server}, REST client ${c.rest}, gRPC client ${c.grpc}, attackers ${c.attackers}, harness ${c.harness}, others ${c.others}`;

// "0 errors", or "12 errors (HTTP 429: 10, ECONNRESET: 2)".
function errorsOf(r: LoadResult): string {
  const kinds = Object.entries(r.errorKinds).map(([k, n]) => `${k}: ${n}`);
  return `${r.errors} errors${kinds.length > 0 ? ` (${kinds.join(", ")})` : ""}`;
}

function describeAttack(a: AttackStats): string {
  const counts = Object.entries(a.counts).map(([k, n]) => `${k}: ${n}`).join(", ");
  return `${a.name} (${a.size}): ${a.opened} opened, ${a.endedByServer} ended by the server (${a.endedAtOnce} at once, mean ${fmtInt(a.meanEndedMs)} ms), ${a.heldAtStop} held at the stop, longest ${fmtInt(a.longestHeldMs)} ms${counts === "" ? "" : `; ${counts}`}`;
}

/** Flood / alone req/s of a client, per round, and their median. */
function ratios(windows: readonly Window[], client: Client): { perRound: number[]; median: number; quietRounds: number[]; quietMedian: number } {
  const rounds = [...new Set(windows.map((w) => w.round))].flatMap((round) => {
    const at = (p: Phase) => windows.find((w) => w.round === round && w.phase === p);
    const [alone, flood] = [at("alone"), at("flood")];
    return alone === undefined || flood === undefined ? [] : [{ round, ratio: flood[client].requestsPerSec / alone[client].requestsPerSec, quiet: !disturbedBy(alone.cores.others) && !disturbedBy(flood.cores.others) }];
  });
  const perRound = rounds.map((r) => r.ratio);
  const quietRounds = rounds.filter((r) => r.quiet).map((r) => r.round);
  return { perRound, median: median(perRound), quietRounds, quietMedian: median(rounds.filter((r) => r.quiet).map((r) => r.ratio)) };
}

function report(ctx: ScenarioContext, o: Outcome): void {
  const s = o.settings;
  const floods = o.windows.filter((w) => w.phase === "flood");
  const alones = o.windows.filter((w) => w.phase === "alone");
  const errors = (client: Client, ws: readonly Window[]) => ws.reduce((a, w) => a + w[client].errors, 0);
  const floodPeak = Math.max(0, ...floods.map((w) => w.rssPeakMiB));
  const alonePeak = Math.max(0, ...alones.map((w) => w.rssPeakMiB));
  const ratio = { rest: ratios(o.windows, "rest"), grpc: ratios(o.windows, "grpc") };
  const stayedUp = o.died === undefined && o.afterwards.rest === undefined && o.afterwards.grpc === undefined;
  const noErrors = errors("rest", o.windows) + errors("grpc", o.windows) === 0;
  const withinBound = floodPeak <= s.rssBoundMiB && o.rssPeakMiB <= s.rssBoundMiB;
  const shown = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : "n/a");
  const verdicts = [
    ...(["rest", "grpc"] as const).map((c) => `normal ${c === "rest" ? "REST" : "gRPC"} client, throughput under flood / alone: ${shown(ratio[c].median)} (rounds: ${ratio[c].perRound.map(shown).join(", ") || "none"}; goal ≥ ${GOAL}): ${ratio[c].median >= GOAL ? "met" : "NOT met"}; over the rounds that other processes did not disturb (> ${DISTURBED} cores), ${ratio[c].quietRounds.length === 0 ? "none" : `${shown(ratio[c].quietMedian)} (rounds ${ratio[c].quietRounds.join(", ")})`}`),
    `errors seen by the normal clients: REST ${errors("rest", floods)} under flood and ${errors("rest", alones)} alone, gRPC ${errors("grpc", floods)} and ${errors("grpc", alones)} (goal 0): ${noErrors ? "met" : "FAIL"}`,
    `server RSS peak (all its processes): ${floodPeak} MiB under flood, ${alonePeak} MiB alone, ${o.rssPeakMiB} MiB over the run (bound ${s.rssBoundMiB} MiB): ${withinBound ? "within" : "FAIL"}`,
    `server stayed up: ${o.died === undefined ? "yes" : `no, it died ${o.died.atSec.toFixed(1)} s into the run`}; new clients answered afterwards: REST ${o.afterwards.rest ?? "yes"}, gRPC ${o.afterwards.grpc ?? "yes"}: ${stayedUp ? "met" : "FAIL"}`,
  ];
  const attackNames = ATTACKS.filter((n) => s.attack.sizes[n] > 0);
  const provenance = { invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`, date: new Date().toISOString(), git: gitState(ctx.root), machine: machineInfo("no wrk: the harness's own load generator") };
  const cell = (r: LoadResult) => [fmtInt(r.requestsPerSec), fmtMs(r.p50Ms), fmtMs(r.p99Ms), errorsOf(r).replace(/ errors?/, "")];
  const md = [
    ...reportHeader("flood: normal clients beside attackers at the server's limits", provenance),
    "",
    `Server: \`shoal serve\`, an echo model (batches of up to 16, 2 ms), 1 worker thread, REST and gRPC; --max-connections ${s.maxConnections} (each port), --headers-timeout ${s.headersTimeoutMs}, --request-timeout ${s.requestTimeoutMs}, --max-request-size ${s.maxRequestSize}${s.serverArgs.length > 0 ? `, ${s.serverArgs.join(" ")}` : ""}. ` +
      `Normal clients, all the time, each in a process of its own: REST V2 JSON inference (16 FP32) at ${s.connections} kept-alive connections, gRPC ModelInfer (raw contents) at ${s.streams} concurrent calls on one channel` +
      (o.paced === undefined ? ", each as fast as it is answered. " : `, paced at ${s.pace} of what they reached alone in a window before the rounds: ${o.paced.rest} and ${o.paced.grpc} req/s. `) +
      `Each round measures them ${ctx.common.durationSec} s alone and ${ctx.common.durationSec} s under flood (after a ${s.rampSec} s ramp; RSS counts from the attackers' start), in alternating order; ${ctx.common.rounds} round(s).`,
    "",
    `Attacks (slots): ${attackNames.map((n) => `${n} ${s.attack.sizes[n]}`).join(", ") || "none"}; a slot the server ends is opened again after ${s.attack.reopenMs} ms; slow clients send a byte every ${s.attack.dripMs} ms (a slow body declares ${s.attack.slowBodyBytes} bytes); ` +
      `${s.attack.streamsPerConnection} header-only calls per connection; a non-reading client sends ${s.attack.streamRequests} requests of ${s.attack.streamRequestBytes / 1024} KiB on one ModelStreamInfer call; gzip bodies inflate to ${s.attack.gzipInflatedBytes} bytes, one every ${s.attack.gzipEveryMs} ms per slot.`,
    "",
    markdownTable(
      ["round", "phase", "REST req/s", "p50 ms", "p99 ms", "errors", "gRPC req/s", "p50 ms", "p99 ms", "errors", "RSS peak MiB", "cores: server", "REST client", "gRPC client", "attackers", "others", "dropped (disturbed)"],
      o.windows.map((w) => [String(w.round), w.phase, ...cell(w.rest), ...cell(w.grpc), String(w.rssPeakMiB), ...(["server", "rest", "grpc"] as const).map((k) => w.cores[k].toFixed(2)), w.phase === "flood" ? w.cores.attackers.toFixed(2) : "–", w.cores.others.toFixed(2), String(w.discarded)]),
      ["r", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
    `RSS of the server: ${o.rssStartMiB} MiB at the start, ${Number.isFinite(o.rssEndMiB) ? `${o.rssEndMiB} MiB` : "gone"} at the end.`,
    "",
    `CPU in cores, median of the windows alone / under flood: ${PARTS.filter((k) => k !== "attackers").map((k) => `${k === "server" ? "server" : `${k === "rest" ? "REST" : "gRPC"} client`} ${medianCores(alones, k)} / ${medianCores(floods, k)}`).join(", ")}, others ${medianCores(alones, "others")} / ${medianCores(floods, "others")}; the attackers ${medianCores(floods, "attackers")}` +
      (Object.values(s.cpus).some((c) => c !== undefined) ? `. Pinned: ${(["server", "clients", "attackers"] as const).map((k) => `${k} ${describeCpus(s.cpus[k])}`).join(", ")}.` : "."),
    "",
    ...floods.flatMap((w) => [
      `### What the attacks did (round ${w.round})`,
      "",
      markdownTable(
        ["attack", "port", "slots", "opened", "ended by server", "at once", "held at stop", "mean ended ms", "longest ms", "answers and errors"],
        (w.attacks ?? []).map((a) => [a.name, a.port, String(a.size), fmtInt(a.opened), fmtInt(a.endedByServer), fmtInt(a.endedAtOnce), fmtInt(a.heldAtStop), fmtInt(a.meanEndedMs), fmtInt(a.longestHeldMs), Object.entries(a.counts).map(([k, n]) => `${k}: ${n}`).join(", ")]),
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "l"],
      ),
      "",
    ]),
    ...(o.died === undefined ? [] : ["## The server died", "", "Its last lines:", "", "```", o.died.output, "```", ""]),
    ...targetsAndCommands(verdicts, { server: [o.command] }),
  ].join("\n");
  const paths = writeResults(ctx.resultsDir, "flood", { ...provenance, common: ctx.common, ratios: ratio, verdicts, ...o }, md);
  for (const v of verdicts) ctx.log(v);
  ctx.log(`wrote ${paths.md}`);
  if (!stayedUp || !noErrors || !withinBound) throw new Error("flood: the server died, a normal client saw errors, or RSS passed the bound (see above)");
}

async function run(ctx: ScenarioContext): Promise<void> {
  const s = settingsOf(ctx);
  const sizes = ATTACKS.filter((n) => s.attack.sizes[n] > 0).map((n) => `${n} ${s.attack.sizes[n]}`);
  ctx.log(`attacks: ${sizes.join(", ") || "none"}; server limits: --max-connections ${s.maxConnections}, --headers-timeout ${s.headersTimeoutMs}, --request-timeout ${s.requestTimeoutMs}, --max-request-size ${s.maxRequestSize} ${s.serverArgs.join(" ")}`);
  report(ctx, await measure(ctx, s));
}

export const scenario: Scenario = {
  name: "flood",
  summary: "Normal REST and gRPC clients alone and beside attackers at the server's limits (idle connections, slowloris, header-only gRPC calls, non-reading streams, gzip bombs); throughput ratio, p99, errors, RSS peak, survival.",
  options: {
    ...Object.fromEntries(
    ["connections", "streams", "max-connections", "headers-timeout", "request-timeout", "max-request-size", "server-args", "attacks", ...ATTACKS, "streams-per-connection", "stream-requests", "stream-kb", "gzip-every", "reopen-ms", "drip-ms", "ramp", "pace", "rss-bound", "server-cpus", "client-cpus", "attacker-cpus"].map((name) => [name, { type: "string" as const }]),
    ),
    ...quietOptions,
  },
  help: {
    "connections <n>": "concurrent requests of the normal REST client, on kept-alive connections (default 8)",
    "streams <n>": "concurrent ModelInfer calls of the normal gRPC client, on one channel (default 8)",
    "max-connections <n>": "the server's --max-connections, each port (default 256)",
    "headers-timeout <ms>": "the server's --headers-timeout (default 2000)",
    "request-timeout <ms>": "the server's --request-timeout (default 4000)",
    "max-request-size <b>": "the server's --max-request-size (default 1048576); a slow body declares half, a gzip body inflates to 4 times",
    "server-args <args>": "more flags for the server, in one string (e.g. gRPC limits)",
    "attacks <list>": `rest, grpc, all (default) or names of: ${ATTACKS.join(", ")}`,
    "idle-rest <n>": "idle connections to the REST port (default: what fills --max-connections beside the other REST attacks and the normal client's connections)",
    "slow-headers <n>": "connections sending their headers a byte at a time (default 64)",
    "slow-bodies <n>": "connections sending a body that never ends (default 64)",
    "gzip-rest <n>": "kept-alive connections sending gzip bodies that inflate past the limit (default 4)",
    "idle-grpc <n>": "idle connections to the gRPC port (default: what fills --max-connections beside the other gRPC attacks and the normal client's channel)",
    "header-only <n>": "gRPC connections opening calls of HEADERS only (default 8)",
    "streams-per-connection <n>": "header-only calls per connection (default 500)",
    "non-reading <n>": "ModelStreamInfer calls that send and never read, one a connection (default 8)",
    "stream-requests <n>": "requests each non-reading call sends (default 1000)",
    "stream-kb <n>": "KiB of tensor in each of them, answered as large (default 16)",
    "gzip-grpc <n>": "gRPC connections sending gzip messages that inflate past the limit (default 4)",
    "gzip-every <ms>": "each gzip slot sends one body this often (default 100)",
    "reopen-ms <ms>": "a slot the server ends is opened again after this long (default 100)",
    "drip-ms <ms>": "a slow client sends one byte this often (default 500)",
    "ramp <s>": "seconds between the attackers' start and the flood window (default 3)",
    "pace <fraction>": "pace the normal clients at this share of what they reach alone, measured before the rounds (default: as fast as answered)",
    "rss-bound <MiB>": "the server's RSS (all its processes) must stay under this (default 512)",
    "server-cpus <list>": "pin the server to these CPUs with taskset, e.g. 0 or 0-1 (default: any)",
    "client-cpus <list>": "pin the two normal clients' processes to these CPUs (default: any)",
    "attacker-cpus <list>": "pin the attackers' process to these CPUs (default: any)",
    "quiet-wait <s>": `before each window, wait up to this long for a second in which other processes use < ${DISTURBED} cores (BENCH_QUIET_WAIT; default 0: don't wait); a window they disturbed is marked`,
    "retries <n>": `measure a window again, up to n times, when other processes used more than ${DISTURBED} cores during it (BENCH_RETRIES; default 0)`,
  },
  run,
};
