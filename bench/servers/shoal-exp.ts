/**
 * Benchmark server: the calculate-exp example with a configurable number of workers.
 *
 *   node --import tsx bench/servers/shoal-exp.ts --num 1 --port 8000 --address 127.0.0.1 --log-level warn
 *
 * `--num N` (or BENCH_NUM=N) sets the workers of the stage (default 1) and `--isolation process`
 * runs them as child processes (default thread); every other flag is Shoal's own. The Worker is
 * examples/calculate-exp.ts's, plus what the isolation benchmark needs to kill a worker and time
 * its replacement: `{"exit": true}` ends the worker (a thread cannot be killed from outside), and
 * `init()` reports how long it took in the gauge `bench_worker_init_seconds`. BENCH_INIT_MS makes
 * `init()` take that long, standing in for a model that loads.
 */
import { Server, Worker, ValidationError } from "shoal";

const INIT_MS = Number(process.env.BENCH_INIT_MS ?? 0);

export class CalculateExp extends Worker {
  initSeconds = this.metrics.gauge({ name: "bench_worker_init_seconds", help: "How long the worker's init() took" });

  override async init(): Promise<void> {
    const t0 = performance.now();
    if (INIT_MS > 0) await new Promise((resolve) => setTimeout(resolve, INIT_MS));
    this.initSeconds.set((performance.now() - t0) / 1000);
  }

  forward(req: any): { y: number } {
    if (req.exit === true) process.exit(1);
    if (!("x" in req)) throw new ValidationError("cannot find key 'x'");
    const x = Number(req.x);
    if (Number.isNaN(x)) throw new ValidationError("cannot convert 'x' value to float");
    return { y: Math.exp(x) };
  }
}

// `--num` and `--isolation` are ours, not Shoal's: take them out before Shoal parses the rest.
const argv = process.argv.slice(2);
function ours(flag: string): string | undefined {
  const at = argv.indexOf(flag);
  return at < 0 ? undefined : argv.splice(at, 2)[1];
}
const num = Number(ours("--num") ?? process.env.BENCH_NUM ?? 1);
if (!Number.isInteger(num) || num < 1) {
  process.stderr.write("shoal-exp: --num (or BENCH_NUM) must be a whole number >= 1\n");
  process.exit(2);
}
const isolation = ours("--isolation") ?? "thread";
if (isolation !== "thread" && isolation !== "process") {
  process.stderr.write("shoal-exp: --isolation must be thread or process\n");
  process.exit(2);
}

const server = new Server();
server.appendWorker(CalculateExp, { num, isolation });
await server.run(argv);
