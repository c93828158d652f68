/**
 * A closed-loop load of streaming generation requests, for the generate and chat scenarios:
 * `connections` clients each send a request, read its Server-Sent Events to the end, and send the
 * next. Each request asks for a length drawn from a seeded log-uniform mix, so every contender
 * gets the same sequence of lengths. Records, per request, the time to its first chunk, the gaps
 * between its chunks and its whole time; {@link streamSweep} runs it over servers and client counts.
 */
import { Agent, request } from "node:http";
import { Random } from "../../test/fuzz/random.js";
import type { ScenarioContext } from "./scenario.js";
import { freePort, startServer, type ServerSpec } from "./server.js";
import { fmtInt } from "./results.js";
import { median, percentile } from "./stats.js";

export interface StreamPoint {
  /** Requests completed within the window. */
  requests: number;
  /** Chunks (tokens) received within the window, from requests completed in it or not. */
  tokens: number;
  /** Time to first chunk of each request completed in the window, in ms. */
  ttft: number[];
  /** Time between two chunks of one stream (inter-token latency), each gap in the window, in ms. */
  itl: number[];
  /** Whole-request time of each, in ms. */
  latency: number[];
  /** Requests that failed (a status other than 200, or a broken stream). */
  errors: number;
  seconds: number;
}

/** A flag's comma-separated positive whole numbers, or `fallback` when it is not given. */
export function list(value: string | boolean | undefined, fallback: number[]): number[] {
  return typeof value === "string" ? value.split(",").map(Number).filter((n) => Number.isInteger(n) && n > 0) : fallback;
}

/** A flag's positive number, or `fallback` when it is not given. */
export function number(value: string | boolean | undefined, fallback: number): number {
  return typeof value === "string" && Number(value) > 0 ? Number(value) : fallback;
}

/** Generation lengths, in tokens: log-uniform between `min` and `max`. */
export function lengths(seed: number, min: number, max: number): () => number {
  const random = new Random(seed);
  return () => Math.round(Math.exp(Math.log(min) + random.next() * (Math.log(max) - Math.log(min))));
}

/**
 * Runs the load for `warmupSec`, then measures for `seconds`. `body(length)` makes a request
 * body asking for `length` tokens.
 */
export async function streamLoad(port: number, path: string, connections: number, warmupSec: number, seconds: number, next: () => number, body: (length: number) => string): Promise<StreamPoint> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let measuring = false;
  let stopping = false;
  const point: StreamPoint = { requests: 0, tokens: 0, ttft: [], itl: [], latency: [], errors: 0, seconds };
  const one = (length: number) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      let first = 0;
      let last = 0;
      const payload = body(length);
      const req = request({ host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json", accept: "text/event-stream", "content-length": Buffer.byteLength(payload) } }, (res) => {
        let tail = "";
        res.setEncoding("utf8");
        res.on("data", (text: string) => {
          const now = performance.now();
          first ||= now;
          // Events end with a blank line; count those that complete in this read. Chunks read
          // together came together: the first has the gap since the last read, the others none.
          const events = (tail + text).split("\n\n");
          tail = events.pop()!;
          const chunks = events.filter((e) => e.startsWith("data: ")).length;
          if (measuring && chunks > 0) {
            point.tokens += chunks;
            for (let i = 0; i < chunks; i++) if (last > 0 || i > 0) point.itl.push(i === 0 ? now - last : 0);
          }
          if (chunks > 0) last = now;
        });
        res.on("end", () => {
          if (measuring) {
            if (res.statusCode === 200 && first > 0) {
              point.requests++;
              point.ttft.push(first - started);
              point.latency.push(performance.now() - started);
            } else point.errors++;
          }
          resolve();
        });
        res.on("error", () => {
          if (measuring) point.errors++;
          resolve();
        });
      });
      req.on("error", () => {
        if (measuring) point.errors++;
        resolve();
      });
      req.end(payload);
    });
  const client = async () => {
    while (!stopping) await one(next());
  };
  const clients = Array.from({ length: connections }, client);
  await sleep(warmupSec * 1000);
  measuring = true;
  await sleep(seconds * 1000);
  measuring = false;
  stopping = true;
  await Promise.all(clients);
  agent.destroy();
  return point;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One server's figures at one client count: medians over the rounds of each round's figure. */
export interface StreamRow<Mode extends string = string> {
  mode: Mode;
  connections: number;
  tokensPerSec: number;
  requestsPerSec: number;
  ttftP50: number;
  ttftP99: number;
  itlP50: number;
  itlP99: number;
  latencyP50: number;
  latencyP99: number;
  errors: number;
}

/** What {@link streamSweep} runs: a server per mode, and the load each server gets. */
export interface StreamSweep<Mode extends string> {
  modes: readonly Mode[];
  connections: readonly number[];
  /** The route the load streams from. */
  path: string;
  /** The server of a mode, on `port`. */
  server(mode: Mode, port: number): ServerSpec;
  /** The lengths asked for in round `round` (the same for every mode). */
  lengths(round: number): () => number;
  /** A request body asking for `length` tokens. */
  body(length: number): string;
}

/**
 * Starts each mode's server in turn (alternating which goes first, round by round, so that none
 * always runs on a machine warmed by another) and drives it at each client count; returns a row
 * per mode and client count.
 */
export async function streamSweep<Mode extends string>(ctx: ScenarioContext, sweep: StreamSweep<Mode>): Promise<StreamRow<Mode>[]> {
  const { common, log } = ctx;
  const points = new Map<string, StreamPoint[]>();
  for (let round = 0; round < common.rounds; round++) {
    for (const mode of round % 2 === 0 ? sweep.modes : [...sweep.modes].reverse()) {
      const server = await startServer(sweep.server(mode, await freePort()));
      try {
        for (const c of sweep.connections) {
          const point = await streamLoad(server.port, sweep.path, c, common.warmupSec, common.durationSec, sweep.lengths(round), sweep.body);
          const key = `${mode}/${c}`;
          points.set(key, [...(points.get(key) ?? []), point]);
          log(`round ${round + 1} ${mode} ${c} clients: ${fmtInt(point.tokens / point.seconds)} tokens/s, ${(point.requests / point.seconds).toFixed(1)} req/s, first token p50 ${percentile(point.ttft, 50).toFixed(1)} ms p99 ${percentile(point.ttft, 99).toFixed(1)} ms, inter-token p50 ${percentile(point.itl, 50).toFixed(1)} ms p99 ${percentile(point.itl, 99).toFixed(1)} ms, ${point.errors} errors`);
        }
      } finally {
        await server.stop();
      }
    }
  }
  return sweep.modes.flatMap((mode) =>
    sweep.connections.map((c) => {
      const ps = points.get(`${mode}/${c}`) ?? [];
      const p = (pick: (p: StreamPoint) => number[], q: number) => median(ps.map((point) => percentile(pick(point), q)));
      return {
        mode,
        connections: c,
        tokensPerSec: median(ps.map((point) => point.tokens / point.seconds)),
        requestsPerSec: median(ps.map((point) => point.requests / point.seconds)),
        ttftP50: p((point) => point.ttft, 50),
        ttftP99: p((point) => point.ttft, 99),
        itlP50: p((point) => point.itl, 50),
        itlP99: p((point) => point.itl, 99),
        latencyP50: p((point) => point.latency, 50),
        latencyP99: p((point) => point.latency, 99),
        errors: ps.reduce((n, point) => n + point.errors, 0),
      };
    }),
  );
}
