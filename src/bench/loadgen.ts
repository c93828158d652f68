/**
 * A load generator measured in windows, for `shoal bench` and the project's benchmarks: a closed
 * loop (`streams` loops, each sending its next request when the last is answered) or an open loop
 * (requests sent at Poisson arrivals of a given rate, whether or not the earlier ones are
 * answered). It runs in the caller's process, so on a small machine it competes with the server
 * for the cores; its senders (http-sender.ts, {@link grpcSender}) prepare each request once.
 */
import * as grpc from "@grpc/grpc-js";

/** A streamed answer's timing: its first chunk after the request was sent, the gaps between the next ones, its chunks. */
export interface Streamed {
  ttftMs: number;
  gapsMs: number[];
  tokens: number;
}

/** One request, sent and answered: resolves true (or a stream's timing), or what went wrong (false when it does not say); rejects on a failed answer. */
export type Send = () => Promise<true | false | string | Streamed>;

/** What a streamed load measured, as `vllm bench serve` reports it. */
export interface StreamResult {
  ttftP50Ms: number;
  ttftP99Ms: number;
  /** The gaps between one chunk and the next, over every request. */
  itlP50Ms: number;
  itlP99Ms: number;
  /** The median over requests of (latency − time to first token) / (chunks − 1). */
  tpotP50Ms: number;
  tokensPerSec: number;
}

/** What a run or a window measured. */
export interface LoadResult {
  requests: number;
  errors: number;
  /** The errors by what went wrong (an HTTP status, a gRPC code, a socket error). */
  errorKinds: Record<string, number>;
  requestsPerSec: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  seconds: number;
  /** With streamed answers. */
  stream?: StreamResult;
}

/** A load that runs until stopped: `window()` ends the current window, returns its samples, and starts the next. */
export interface Load {
  window(): Samples;
  stop(): Promise<Samples>;
}

/** Runs `streams` loops of `send` for `seconds` and summarises them. */
export async function runLoad(send: Send, streams: number, seconds: number): Promise<LoadResult> {
  const samples = new Samples();
  const end = performance.now() + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end) samples.record(await timed(send, performance.now()));
  };
  await Promise.all(Array.from({ length: streams }, loop));
  return samples.summary();
}

/**
 * `streams` loops of `send` that run until stopped, measured in windows. The loops never pause
 * between windows, so their connections stay open and in use. After a failed request a loop
 * waits 10 ms, so that a server that is gone is not called in a busy loop.
 *
 * `pace(rate)` makes them send `rate` requests a second in all from then on, each loop its share
 * at even intervals (still one request at a time each: a loop whose answer comes late sends its
 * next at once, and falls behind when the server cannot keep up); `pace(undefined)` lets them go
 * as fast as they are answered again.
 */
export function closedLoop(send: Send, streams: number): Load & { pace(rate: number | undefined): void } {
  const { record, window } = windowed();
  let running = true;
  let intervalMs: number | undefined;
  const loop = async () => {
    let next = performance.now();
    while (running) {
      if (intervalMs !== undefined) {
        next = Math.max(next + intervalMs, performance.now() - intervalMs);
        const wait = next - performance.now();
        if (wait > 0) await sleep(wait);
      }
      // Counted in the window it ends in.
      const outcome = await timed(send, performance.now());
      record(outcome);
      if (!outcome.ok) await sleep(10);
    }
  };
  const loops = Promise.all(Array.from({ length: streams }, loop));
  return {
    window,
    pace: (rate) => {
      intervalMs = rate === undefined ? undefined : (streams * 1000) / rate;
    },
    stop: async () => {
      running = false;
      await loops;
      return window();
    },
  };
}

/** {@link closedLoop}, each window summarised. */
export function steadyLoad(send: Send, streams: number): { window(): LoadResult; stop(): Promise<LoadResult>; pace(rate: number | undefined): void } {
  const load = closedLoop(send, streams);
  return { window: () => load.window().summary(), stop: async () => (await load.stop()).summary(), pace: load.pace };
}

/**
 * Requests at the arrivals of a Poisson process of `rate` a second (exponential gaps drawn from
 * `random`, a function giving [0, 1)), each sent when it arrives whatever is still in flight.
 * A request's latency counts from its arrival, so time it spends waiting for a free connection
 * is counted (no coordinated omission).
 */
export function openLoop(send: Send, rate: number, random: () => number = Math.random): Load {
  const { record, window } = windowed();
  let running = true;
  const inFlight = new Set<Promise<void>>();
  let next = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arrive = () => {
    const now = performance.now();
    // Timers fire late: every arrival due by now goes at once, at its own time.
    while (running && next <= now) {
      const at = next;
      const request = timed(send, at).then((outcome) => {
        record(outcome);
        inFlight.delete(request);
      });
      inFlight.add(request);
      next += (-Math.log(1 - random()) / rate) * 1000;
    }
    if (running) timer = setTimeout(arrive, Math.max(0, next - performance.now()));
  };
  arrive();
  return {
    window,
    stop: async () => {
      running = false;
      clearTimeout(timer);
      await Promise.all(inFlight);
      return window();
    },
  };
}

/**
 * Makes unary calls of `method` (`/package.Service/Method`) with a message serialized once
 * beforehand, on one channel (HTTP/2 multiplexes the streams), as gRPC clients usually do.
 */
export function grpcSender(target: string, method: string, message: Buffer): { send: Send; close(): void } {
  const client = new grpc.Client(target, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
  const identity = (b: Buffer) => b;
  const send: Send = () => new Promise((resolve) => client.makeUnaryRequest(method, identity, identity, message, (err) => resolve(err === null || `gRPC ${grpc.status[err.code]}`)));
  return { send, close: () => client.close() };
}

type Outcome = { ok: boolean; ms: number; error?: string; stream?: Streamed };

// The current window's samples, and the call that ends it (counting from then on in the next).
function windowed(): { record(outcome: Outcome): void; window(): Samples } {
  let current = new Samples();
  return {
    record: (outcome) => current.record(outcome),
    window: () => {
      const done = current;
      current = new Samples();
      return done.end();
    },
  };
}

// Sends one request; resolves whether it succeeded and how long it took from `since`.
async function timed(send: Send, since: number): Promise<Outcome> {
  let result: Awaited<ReturnType<Send>>;
  try {
    result = await send();
  } catch (err) {
    result = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
  const ms = performance.now() - since;
  if (typeof result === "object") return { ok: true, ms, stream: result };
  return result === true ? { ok: true, ms } : { ok: false, ms, error: result === false ? "failed" : result };
}

/** The answers of one stretch of a load: each request's latency (and a stream's timing), and the failed ones. */
export class Samples {
  readonly latencies: number[] = [];
  readonly streams: (Streamed & { ms: number })[] = [];
  readonly errorKinds: Record<string, number> = {};
  readonly #start = performance.now();
  #seconds: number | undefined;
  errors = 0;

  record({ ok, ms, error, stream }: Outcome): void {
    if (ok) {
      this.latencies.push(ms);
      if (stream !== undefined) this.streams.push({ ...stream, ms });
    } else {
      this.errors++;
      this.errorKinds[error!] = (this.errorKinds[error!] ?? 0) + 1;
    }
  }

  /** Ends the window: its length is fixed from now. */
  end(): this {
    this.#seconds ??= (performance.now() - this.#start) / 1000;
    return this;
  }

  get seconds(): number {
    return this.#seconds ?? (performance.now() - this.#start) / 1000;
  }

  summary(): LoadResult {
    return summarise([this]);
  }
}

/** The summary of consecutive windows taken as one. */
export function summarise(windows: readonly Samples[]): LoadResult {
  const seconds = windows.reduce((s, w) => s + w.seconds, 0);
  const latencies = sorted(windows.flatMap((w) => w.latencies));
  const streams = windows.flatMap((w) => w.streams);
  const errorKinds: Record<string, number> = {};
  for (const w of windows) for (const [kind, n] of Object.entries(w.errorKinds)) errorKinds[kind] = (errorKinds[kind] ?? 0) + n;
  const result: LoadResult = {
    requests: latencies.length,
    errors: windows.reduce((s, w) => s + w.errors, 0),
    errorKinds,
    requestsPerSec: latencies.length / seconds,
    meanMs: latencies.reduce((s, v) => s + v, 0) / latencies.length,
    p50Ms: at(latencies, 0.5),
    p90Ms: at(latencies, 0.9),
    p99Ms: at(latencies, 0.99),
    seconds,
  };
  if (streams.length > 0) {
    const ttft = sorted(streams.map((s) => s.ttftMs).filter(Number.isFinite));
    const itl = sorted(streams.flatMap((s) => s.gapsMs));
    const tpot = sorted(streams.filter((s) => s.tokens > 1 && Number.isFinite(s.ttftMs)).map((s) => (s.ms - s.ttftMs) / (s.tokens - 1)));
    result.stream = {
      ttftP50Ms: at(ttft, 0.5),
      ttftP99Ms: at(ttft, 0.99),
      itlP50Ms: at(itl, 0.5),
      itlP99Ms: at(itl, 0.99),
      tpotP50Ms: at(tpot, 0.5),
      tokensPerSec: streams.reduce((s, v) => s + v.tokens, 0) / seconds,
    };
  }
  return result;
}

const sorted = (values: number[]) => values.sort((a, b) => a - b);

// The nearest-rank quantile of sorted values; NaN for none.
const at = (values: readonly number[], q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))] ?? NaN;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
