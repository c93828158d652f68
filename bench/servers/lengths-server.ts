/**
 * Benchmark server of the lengths scenario: one stage of a Worker that pads each batch to its
 * longest item, as a sequence model does (an encoder over a padded batch tensor): it spins the CPU
 * for BENCH_FIXED_MS plus BENCH_TOKEN_MS for each token of the padded batch (items × the longest
 * item's length), in batches of up to 16. An item is `{"t": "…"}`; its length is its text's.
 *
 *   node --import tsx bench/servers/lengths-server.ts --policy count|cost|buckets --port 8000 --log-level warn
 *
 * `--policy count`: batches bounded by their count only; `cost`: and by `maxBatchCost` (an item's
 * cost is its body's bytes, the default `sizeOf`); `buckets`: and by `batchBuckets` too. Every
 * other flag is Shoal's own.
 */
import { Server, Worker, type StageOptions } from "shoal";

const FIXED_MS = Number(process.env.BENCH_FIXED_MS ?? 3);
const TOKEN_MS = Number(process.env.BENCH_TOKEN_MS ?? 0.008);
const MAX_BATCH = 16;

export class Padded extends Worker {
  computed = this.metrics.counter({ name: "bench_items_computed_total", help: "Items the Worker computed" });
  tokens = this.metrics.counter({ name: "bench_padded_tokens_total", help: "Tokens of the padded batches the Worker computed" });

  forward(items: { t: string }[]): unknown[] {
    let longest = 0;
    for (const item of items) longest = Math.max(longest, item.t.length);
    const end = performance.now() + FIXED_MS + TOKEN_MS * longest * items.length;
    while (performance.now() < end) {
      // The CPU is the model.
    }
    this.computed.inc(items.length);
    this.tokens.inc(longest * items.length);
    return items.map((item) => ({ length: item.t.length }));
  }
}

const argv = process.argv.slice(2);
const at = argv.indexOf("--policy");
const policy = at < 0 ? "count" : argv.splice(at, 2)[1];
const count: StageOptions = { route: "/infer", maxBatchSize: MAX_BATCH, maxWaitMs: 2 };
// Bodies of 24, 72 and 264 bytes for texts of 16, 64 and 256 characters: 16 short or medium ones fit the budget, or 4 long ones.
const cost: StageOptions = { ...count, maxBatchCost: 1200 };
const options: Record<string, StageOptions> = { count, cost, buckets: { ...cost, batchBuckets: [40, 100] } };
if (options[policy!] === undefined) {
  process.stderr.write("lengths-server: --policy must be count, cost or buckets\n");
  process.exit(2);
}
const server = new Server();
server.appendWorker(Padded, options[policy!]!);
await server.run(argv);
