/**
 * A small closed-loop load generator of the benchmark's own, for what wrk cannot send (gRPC), and
 * for HTTP beside it so that both protocols are measured by the same client: `streams` loops, each
 * sending its next request when the last is answered, for a fixed time. It runs in the harness's
 * process, so its own CPU time is not the server's; on a small machine it competes with the server
 * for the cores, for every protocol alike.
 */
import { Agent, request } from "node:http";
import * as grpc from "@grpc/grpc-js";

/** One request, sent and answered: resolves true, or what went wrong (false when it does not say); rejects on a failed answer. */
export type Send = () => Promise<true | false | string>;

/** What a run measured. */
export interface LoadResult {
  requests: number;
  errors: number;
  /** The errors by what went wrong (an HTTP status, a gRPC code, a socket error). */
  errorKinds: Record<string, number>;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** Runs `streams` loops of `send` for `seconds` and summarises them. */
export async function runLoad(send: Send, streams: number, seconds: number): Promise<LoadResult> {
  const window = new LoadWindow();
  const end = performance.now() + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end) window.record(await timed(send));
  };
  await Promise.all(Array.from({ length: streams }, loop));
  return window.summary();
}

/**
 * `streams` loops of `send` that run until stopped, measured in windows: `window()` summarises
 * what was answered since the last call and starts the next window. The loops never pause between
 * windows, so their connections stay open and in use (a client that keeps working while
 * something else happens to the server). After a failed request a loop waits 10 ms, so that a
 * server that is gone is not called in a busy loop.
 *
 * `pace(rate)` makes them send `rate` requests a second in all from then on, each loop its share
 * at even intervals (still one request at a time each: a loop whose answer comes late sends its
 * next at once, and falls behind when the server cannot keep up); `pace(undefined)` lets them go
 * as fast as they are answered again.
 */
export function steadyLoad(send: Send, streams: number): { window(): LoadResult; stop(): Promise<LoadResult>; pace(rate: number | undefined): void } {
  let current = new LoadWindow();
  let running = true;
  let intervalMs: number | undefined;
  const loop = async () => {
    let next = performance.now();
    while (running) {
      if (intervalMs !== undefined) {
        next = Math.max(next + intervalMs, performance.now() - intervalMs);
        const wait = next - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      // Counted in the window it ends in.
      const outcome = await timed(send);
      current.record(outcome);
      if (!outcome.ok) await new Promise((r) => setTimeout(r, 10));
    }
  };
  const loops = Promise.all(Array.from({ length: streams }, loop));
  const window = () => {
    const done = current;
    current = new LoadWindow();
    return done.summary();
  };
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

/** POSTs `body` to `url` over kept-alive connections (as many as there are streams). */
export function httpSender(url: string, body: Buffer, headers: Record<string, string>, streams: number): { send: Send; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: streams });
  const target = new URL(url);
  const send: Send = () =>
    new Promise((resolve, reject) => {
      const req = request({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: { ...headers, "content-length": body.byteLength } }, (res) => {
        res.on("data", () => {});
        res.on("end", () => resolve(res.statusCode === 200 || `HTTP ${res.statusCode}`));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  return { send, close: () => agent.destroy() };
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

/** Sends one request; resolves whether it succeeded and how long it took. */
async function timed(send: Send): Promise<Outcome> {
  const t = performance.now();
  let result: true | false | string;
  try {
    result = await send();
  } catch (err) {
    result = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
  const ms = performance.now() - t;
  return result === true ? { ok: true, ms } : { ok: false, ms, error: result === false ? "failed" : result };
}

type Outcome = { ok: boolean; ms: number; error?: string };

// The answers of one stretch of a load: each request's latency, and the failed ones.
class LoadWindow {
  readonly #latencies: number[] = [];
  readonly #start = performance.now();
  readonly #errorKinds: Record<string, number> = {};
  #errors = 0;

  record({ ok, ms, error }: Outcome): void {
    if (ok) this.#latencies.push(ms);
    else {
      this.#errors++;
      this.#errorKinds[error!] = (this.#errorKinds[error!] ?? 0) + 1;
    }
  }

  summary(): LoadResult {
    const elapsed = (performance.now() - this.#start) / 1000;
    const latencies = this.#latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
    return { requests: latencies.length, errors: this.#errors, errorKinds: this.#errorKinds, requestsPerSec: latencies.length / elapsed, p50Ms: at(0.5), p99Ms: at(0.99) };
  }
}
