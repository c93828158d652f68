/**
 * soak: a long steady load at a share of the measured capacity, watching the server's memory and
 * event loop. It starts bench/servers/soak-server.ts (a batching stage, a two-stage pipeline and
 * an ONNX model on the shared pool, all threads), measures its capacity with a closed loop over
 * `--connections` connections, then holds `--load` (80 %) of it with an open-loop client of its
 * own (wrk2 is not at hand) for `--duration` seconds (600 by default), and every
 * `--sample-every` seconds reads the server's RSS (from /proc) and its event-loop delay (the
 * server measures its own and writes it to a file).
 *
 * RSS drift is (the median of the last three samples − the median of the first three) / the
 * latter, over the last 80 % of the run (the last 8 minutes of 10): the first minutes are the
 * heap and the caches growing to their working size. The goal is growth under 5 %; the floor
 * drift and the least-squares slope over the same samples are reported beside it (see
 * rssDrift). Results go to
 * bench/results/soak.{json,md} with soak-rss.svg and soak-eventloop.svg.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeInferenceRequest } from "../../src/v2/index.js";
import { KeepAliveConnection, requestBytes, type RawResponse } from "../../test/fuzz/raw-http.js";
import { Random } from "../../test/fuzz/random.js";
import { makeMlp } from "../../test/fixtures/make-mlp.js";
import { fmtInt, markdownTable, writeResults } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer } from "../lib/server.js";
import { median, percentile } from "../lib/stats.js";
import { lineChart } from "../../src/bench/svg.js";

export const defaults = { duration: 600, rounds: 1, warmup: 5 };

/** One sample of the server, taken every `--sample-every` seconds. */
interface Sample {
  /** Seconds since the steady load began. */
  t: number;
  rssMb: number;
  /** The HTTP thread's V8 heap in use, and memory outside it (buffers), as the server reported. */
  heapUsedMb: number;
  externalMb: number;
  /** Event-loop delay over the period, in ms, as the server measured it. */
  loopP50: number;
  loopP99: number;
  loopMax: number;
  /** Requests answered in the period, per second, and how many were not 2xx/4xx as intended. */
  rate: number;
  errors: number;
  latencyP50: number;
  latencyP99: number;
}

/** The bodies the load rotates through, each with the status it should get. */
function requestMix(): { weight: number; bytes: Buffer; status: number }[] {
  const post = (path: string, body: Uint8Array, headers: Record<string, string>) => requestBytes("POST", path, headers, body);
  const json = { "content-type": "application/json" };
  const input = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i));
  const v2json = encodeInferenceRequest({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 64], data: input }] }, { binaryInputs: false });
  const v2bin = encodeInferenceRequest({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 64], data: input }] }, { binaryInputs: true });
  return [
    { weight: 45, bytes: post("/soak/exp", Buffer.from('{"x": 0.5}'), json), status: 200 },
    { weight: 20, bytes: post("/soak/pipeline", Buffer.from('{"n": 256}'), json), status: 200 },
    { weight: 20, bytes: post("/v2/models/mlp/infer", v2json.body, { "content-type": v2json.contentType }), status: 200 },
    { weight: 10, bytes: post("/v2/models/mlp/infer", v2bin.body, { "content-type": v2bin.contentType, "inference-header-content-length": String(v2bin.headerLength) }), status: 200 },
    { weight: 5, bytes: post("/soak/exp", Buffer.from('{"x": 0.5'), json), status: 400 },
  ];
}

/** What the load saw since it was last asked. */
class Window {
  latencies: number[] = [];
  errors = 0;
  answered = 0;

  take(): Window {
    const taken = Object.assign(new Window(), this);
    this.latencies = [];
    this.errors = 0;
    this.answered = 0;
    return taken;
  }
}

/**
 * Sends the mix over `connections` kept-alive connections until `stop()`: as fast as answers come
 * (closed loop) when `rate` is undefined, else `rate` requests a second in all (open loop; a lane
 * that falls behind sends at once, and the shortfall shows in the achieved rate).
 */
function load(port: number, connections: number, rate: number | undefined, seed: number, window: Window): { stop(): Promise<void> } {
  const mix = requestMix();
  const table = mix.map((m) => [m.weight, m] as const);
  let running = true;
  const start = performance.now();
  const lane = async (k: number) => {
    const random = new Random(seed + k);
    let conn = new KeepAliveConnection(port);
    for (let j = 0; running; j++) {
      if (rate !== undefined) {
        const due = start + ((j * connections + k) * 1000) / rate - performance.now();
        if (due > 0) await new Promise((r) => setTimeout(r, due));
        if (!running) break;
      }
      const m = random.weighted(table);
      const sent = performance.now();
      let response: RawResponse | undefined;
      try {
        response = await conn.send({ bytes: m.bytes });
      } catch {
        // counted below
      }
      window.answered++;
      window.latencies.push(performance.now() - sent);
      if (response?.status !== m.status) window.errors++;
      if (response === undefined || conn.closed) conn = new KeepAliveConnection(port);
    }
    conn.close();
  };
  const lanes = Promise.all(Array.from({ length: connections }, (_, k) => lane(k)));
  return {
    async stop() {
      running = false;
      await lanes;
    },
  };
}

function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? NaN : Number(m[1]) / 1024;
}

/** The server's latest report of its event loop and heap. */
function lastReport(file: string): { p50: number; p99: number; max: number; heapUsedMb: number; externalMb: number } {
  try {
    const lines = readFileSync(file, "utf8").trim().split("\n");
    return JSON.parse(lines[lines.length - 1]!) as ReturnType<typeof lastReport>;
  } catch {
    return { p50: NaN, p99: NaN, max: NaN, heapUsedMb: NaN, externalMb: NaN };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * RSS drift over the last `share` of the samples: from the median of the first three to the
 * median of the last three, as a share of the first. RSS of a garbage-collected process rises
 * and falls, so two more figures over the same samples: the floor drift (the lowest sample of
 * the last third against the lowest of the first third), which a leak raises however the heap
 * breathes, and the least-squares slope in MB a minute.
 */
export function rssDrift(samples: readonly Sample[], share = 0.8): { fromMb: number; toMb: number; drift: number; floorDrift: number; fromT: number; mbPerMinute: number } {
  const window = samples.filter((s) => s.t >= samples[samples.length - 1]!.t * (1 - share));
  const rss = window.map((s) => s.rssMb);
  const fromMb = median(rss.slice(0, 3));
  const toMb = median(rss.slice(-3));
  const third = Math.max(1, Math.floor(rss.length / 3));
  const floorDrift = Math.min(...rss.slice(-third)) / Math.min(...rss.slice(0, third)) - 1;
  const n = window.length;
  const mt = window.reduce((a, s) => a + s.t, 0) / n;
  const mr = rss.reduce((a, r) => a + r, 0) / n;
  const cov = window.reduce((a, s) => a + (s.t - mt) * (s.rssMb - mr), 0);
  const vt = window.reduce((a, s) => a + (s.t - mt) ** 2, 0);
  return { fromMb, toMb, drift: (toMb - fromMb) / fromMb, floorDrift, fromT: window[0]?.t ?? 0, mbPerMinute: vt > 0 ? (cov / vt) * 60 : NaN };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const v = ctx.values;
  const number = (name: string, fallback: number) => {
    const n = v[name] === undefined ? fallback : Number(v[name]);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
    return n;
  };
  const durationSec = ctx.common.durationSec;
  const connections = number("connections", 32);
  const share = number("load", 0.8);
  const sampleSec = number("sample-every", 10);
  const capacitySec = number("capacity-seconds", 10);
  const seed = number("seed", 1);

  const repo = mkdtempSync(join(tmpdir(), "shoal-soak-"));
  mkdirSync(join(repo, "mlp"));
  makeMlp(join(repo, "mlp", "model.onnx"), { inputs: 64, hidden: 128, layers: 2, outputs: 10 });
  writeFileSync(join(repo, "mlp", "model-settings.json"), JSON.stringify({ name: "mlp", runtime: "onnx", maxBatchSize: 16, maxWaitMs: 2 }));
  const statsFile = join(repo, "event-loop.jsonl");
  const port = await freePort();
  const server = await startServer({
    name: "shoal",
    script: "bench/servers/soak-server.ts",
    args: ["--port", "{port}", "--grpc-port", "0", "--address", "127.0.0.1", "--model-repository", repo, "--workers", "1", "--log-level", "warn", "--log-format", "json"],
    port,
    cwd: ctx.root,
    env: { SOAK_STATS_FILE: statsFile, SOAK_SAMPLE_MS: String(sampleSec * 1000) },
    probe: { path: "/soak/exp", body: '{"x": 1}' },
    startTimeoutMs: 60_000,
  });
  try {
    // Capacity: a closed loop after a warm-up.
    const warm = new Window();
    let running = load(port, connections, undefined, seed, warm);
    await sleep(ctx.common.warmupSec * 1000);
    warm.take();
    await sleep(capacitySec * 1000);
    const measured = warm.take();
    await running.stop();
    const capacity = measured.answered / capacitySec;
    const rate = Math.max(1, Math.round(capacity * share));
    ctx.log(`capacity ${fmtInt(capacity)} req/s at ${connections} connections (closed loop, ${capacitySec} s); holding ${fmtInt(rate)} req/s (${share * 100} %) for ${durationSec} s`);

    // The soak.
    const window = new Window();
    const samples: Sample[] = [];
    const start = Date.now();
    running = load(port, connections, rate, seed + 1000, window);
    while (Date.now() - start < durationSec * 1000) {
      await sleep(Math.min(sampleSec * 1000, durationSec * 1000 - (Date.now() - start)));
      const w = window.take();
      const loop = lastReport(statsFile);
      const sample: Sample = {
        t: (Date.now() - start) / 1000,
        rssMb: rssMb(server.pid),
        heapUsedMb: loop.heapUsedMb,
        externalMb: loop.externalMb,
        loopP50: loop.p50,
        loopP99: loop.p99,
        loopMax: loop.max,
        rate: w.answered / sampleSec,
        errors: w.errors,
        latencyP50: percentile(w.latencies, 50),
        latencyP99: percentile(w.latencies, 99),
      };
      samples.push(sample);
      ctx.log(`t=${sample.t.toFixed(0)} s: RSS ${sample.rssMb.toFixed(1)} MB (HTTP thread heap ${sample.heapUsedMb.toFixed(1)}), event loop p99 ${sample.loopP99.toFixed(1)} ms (max ${sample.loopMax.toFixed(1)}), ${fmtInt(sample.rate)} req/s, p99 ${sample.latencyP99.toFixed(1)} ms, ${sample.errors} unexpected answers`);
    }
    await running.stop();
    const inFlight = /^shoal_requests_in_flight (\S+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1];

    const drift = rssDrift(samples);
    const errors = samples.reduce((n, s) => n + s.errors, 0);
    const achieved = samples.reduce((n, s) => n + s.rate, 0) / samples.length;
    // The goal bounds growth: memory given back is no leak.
    const verdict = drift.drift < 0.05 ? "met" : "NOT met";
    ctx.log(`RSS ${drift.fromMb.toFixed(1)} MB at t=${drift.fromT.toFixed(0)} s -> ${drift.toMb.toFixed(1)} MB at the end: drift ${(drift.drift * 100).toFixed(2)} % (goal < +5 %: ${verdict}), floor drift ${(drift.floorDrift * 100).toFixed(2)} %, slope ${drift.mbPerMinute.toFixed(2)} MB/min; ${errors} unexpected answers; in flight afterwards: ${inFlight}`);

    const minutes = (s: Sample) => s.t / 60;
    writeFileSync(join(ctx.resultsDir, "soak-rss.svg"), lineChart(
        [
          { name: "RSS", points: samples.map((s) => [minutes(s), s.rssMb]) },
          { name: "HTTP thread heap", points: samples.map((s) => [minutes(s), s.heapUsedMb]) },
          { name: "external", points: samples.map((s) => [minutes(s), s.externalMb]) },
        ],
        { title: "soak: server memory", xLabel: "minutes at steady load", yLabel: "MB" },
      ));
    writeFileSync(
      join(ctx.resultsDir, "soak-eventloop.svg"),
      lineChart(
        [
          { name: "p50", points: samples.map((s) => [minutes(s), s.loopP50]) },
          { name: "p99", points: samples.map((s) => [minutes(s), s.loopP99]) },
        ],
        { title: "soak: event-loop delay of the HTTP thread", xLabel: "minutes at steady load", yLabel: "ms" },
      ),
    );
    const md = [
      "# soak",
      "",
      `Generated by \`npm run bench -- soak --duration ${durationSec}\` on ${new Date().toISOString()}. See docs/reliability.md.`,
      "",
      `- Capacity (closed loop, ${connections} connections, ${capacitySec} s): ${fmtInt(capacity)} req/s; held ${fmtInt(rate)} req/s (${share * 100} %), achieved ${fmtInt(achieved)} req/s on average.`,
      `- RSS drift over the last ${Math.round((samples[samples.length - 1]!.t - drift.fromT) / 60 * 10) / 10} minutes: ${drift.fromMb.toFixed(1)} MB -> ${drift.toMb.toFixed(1)} MB, ${(drift.drift * 100).toFixed(2)} % (goal < +5 %: ${verdict}); floor drift (lowest sample of the last third against the first third) ${(drift.floorDrift * 100).toFixed(2)} %; least-squares slope ${drift.mbPerMinute.toFixed(2)} MB/min.`,
      `- Unexpected answers: ${errors}; requests in flight after the load: ${inFlight}.`,
      "",
      "![RSS](soak-rss.svg) ![event loop](soak-eventloop.svg)",
      "",
      "Event-loop delay: how late a 10 ms timer of the server's HTTP thread fired, over each period.",
      "",
      markdownTable(
        ["t (s)", "RSS (MB)", "heap (MB)", "external (MB)", "loop p50 (ms)", "loop p99 (ms)", "loop max (ms)", "req/s", "latency p50 (ms)", "latency p99 (ms)", "unexpected"],
        samples.map((s) => [s.t.toFixed(0), s.rssMb.toFixed(1), s.heapUsedMb.toFixed(1), s.externalMb.toFixed(1), s.loopP50.toFixed(2), s.loopP99.toFixed(2), s.loopMax.toFixed(1), fmtInt(s.rate), s.latencyP50.toFixed(2), s.latencyP99.toFixed(2), String(s.errors)]),
        ["r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
      ),
    ].join("\n");
    const paths = writeResults(ctx.resultsDir, "soak", { durationSec, connections, capacity, rate, drift, samples }, md);
    ctx.log(`wrote ${paths.md}`);
  } finally {
    await server.stop();
    rmSync(repo, { recursive: true, force: true });
  }
}

export const scenario: Scenario = {
  name: "soak",
  summary: "A long steady load at 80 % of the measured capacity: RSS and event-loop delay sampled every 10 s, RSS drift over the last 80 % of the run (--duration, default 600 s).",
  options: {
    connections: { type: "string" },
    load: { type: "string" },
    "sample-every": { type: "string" },
    "capacity-seconds": { type: "string" },
    seed: { type: "string" },
  },
  help: {
    "connections <n>": "kept-alive connections of the load (default 32)",
    "load <share>": "share of the measured capacity to hold (default 0.8)",
    "sample-every <s>": "seconds between samples of RSS and event-loop delay (default 10)",
    "capacity-seconds <s>": "how long the closed loop measures capacity, after --warmup (default 10)",
    "seed <n>": "seed of the request mix (default 1)",
  },
  run,
};
