/**
 * Benchmark server for the soak: a batching JSON stage (`/soak/exp`), a two-stage pipeline that
 * passes a Float32Array between stages (`/soak/pipeline`), and, with `--model-repository`, the
 * repository's models on the shared pool. Every worker is a thread, so the process's RSS is the
 * whole server's.
 *
 * It measures its own event-loop delay (the HTTP thread's, where the coordinator runs) and,
 * every `SOAK_SAMPLE_MS` (default 10 s), appends `{"t", "p50", "p99", "max", "mean"}` (ms by which
 * a 10 ms timer was late, over the period) with the HTTP thread's `heapUsedMb` and `externalMb` as a line to the file `SOAK_STATS_FILE` names.
 *
 *   SOAK_STATS_FILE=/tmp/eld.jsonl node --import tsx bench/servers/soak-server.ts --port 8000 --model-repository dir
 */
import { appendFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Server, ValidationError, Worker } from "shoal";

/** `{x}` to `{y: exp(x)}`, in batches. */
export class Exp extends Worker {
  forward(items: { x?: unknown }[]): unknown[] {
    return items.map((item) => (typeof item?.x === "number" ? { y: Math.exp(item.x) } : new ValidationError("'x' must be a number")));
  }
}

/** `{n}` to n float32 values. */
export class Embed extends Worker {
  forward(req: { n?: unknown }): Float32Array {
    const n = req?.n;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 65_536) throw new ValidationError("'n' must be a whole number from 0 to 65536");
    return Float32Array.from({ length: n }, (_, k) => k);
  }
}

/** Their sum. */
export class Reduce extends Worker {
  forward(values: Float32Array) {
    let sum = 0;
    for (const v of values) sum += v;
    return { sum };
  }
}

const server = new Server();
server.appendWorker(Exp, { route: "/soak/exp", maxBatchSize: 16, maxWaitMs: 2 });
server.appendWorker(Embed, { route: "/soak/pipeline" });
server.appendWorker(Reduce, { route: "/soak/pipeline" });
// Only the coordinator measures: run() resolves with its address there, and with undefined in
// the worker threads, which import this module too.
const address = await server.run();
const statsFile = process.env.SOAK_STATS_FILE;
if (address !== undefined && statsFile !== undefined) {
  const resolutionMs = 10;
  const delay = monitorEventLoopDelay({ resolution: resolutionMs });
  delay.enable();
  // The histogram holds the time between its timer's turns; the delay is what exceeds the period.
  const ms = (ns: number) => Math.max(0, ns / 1e6 - resolutionMs);
  setInterval(() => {
    const memory = process.memoryUsage();
    const mb = (bytes: number) => bytes / 1024 / 1024;
    const line = { t: Date.now(), p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), mean: ms(delay.mean), heapUsedMb: mb(memory.heapUsed), externalMb: mb(memory.external) };
    appendFileSync(statsFile, `${JSON.stringify(line)}\n`);
    delay.reset();
  }, Number(process.env.SOAK_SAMPLE_MS ?? 10_000)).unref();
}
