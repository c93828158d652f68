/**
 * Benchmark server of the overload scenario: one stage of a compute-bound Worker that spins the
 * CPU for BENCH_FIXED_MS plus BENCH_ITEM_MS per item of each batch (a model whose batch costs a
 * fixed part and a part per row, as the MLP of `model` does, with no model file to fetch), in
 * batches of up to BENCH_MAX_BATCH.
 *
 *   node --import tsx bench/servers/overload-server.ts --policy fifo|sched|auto --port 8000 --log-level warn
 *
 * `--policy fifo`: the stage as before issue 26's rules (first in, first out, a fixed wait);
 * `sched`: two priority levels, admission by predicted latency and two tenants of equal weight,
 * the same fixed wait; `auto`: `sched` with `maxWaitMs: "auto"`; `plain`: the stage alone with
 * BENCH_MAX_WAIT_MS (a number of ms, or "auto"), for the wait sweep. Every other flag is Shoal's own.
 */
import { Server, Worker, type StageOptions } from "shoal";

const FIXED_MS = Number(process.env.BENCH_FIXED_MS ?? 10);
const ITEM_MS = Number(process.env.BENCH_ITEM_MS ?? 2);
const MAX_BATCH = Number(process.env.BENCH_MAX_BATCH ?? 16);
const MAX_WAIT_MS = process.env.BENCH_MAX_WAIT_MS === "auto" ? "auto" : Number(process.env.BENCH_MAX_WAIT_MS ?? 2);

export class Spin extends Worker {
  computed = this.metrics.counter({ name: "bench_items_computed_total", help: "Items the Worker computed" });

  forward(items: unknown[]): unknown[] {
    const end = performance.now() + FIXED_MS + ITEM_MS * items.length;
    while (performance.now() < end) {
      // The CPU is the model.
    }
    this.computed.inc(items.length);
    return items.map(() => ({ ok: true }));
  }
}

const argv = process.argv.slice(2);
const at = argv.indexOf("--policy");
const policy = at < 0 ? "fifo" : argv.splice(at, 2)[1];
const base: StageOptions = { route: "/infer", maxBatchSize: MAX_BATCH, maxWaitMs: MAX_WAIT_MS };
const rules: StageOptions = { priorityLevels: 2, predictAdmission: true, tenantWeights: { a: 1, b: 1 } };
const options: Record<string, StageOptions> = { fifo: base, sched: { ...base, ...rules }, auto: { ...base, ...rules, maxWaitMs: "auto" }, plain: base };
if (options[policy!] === undefined) {
  process.stderr.write("overload-server: --policy must be fifo, sched or auto\n");
  process.exit(2);
}
const server = new Server();
server.appendWorker(Spin, options[policy!]!);
await server.run(argv);
