/**
 * Benchmark server: the calculate-exp example with a configurable number of workers.
 *
 *   node --import tsx bench/servers/shoal-exp.ts --num 1 --port 8000 --address 127.0.0.1 --log-level warn
 *
 * `--num N` (or BENCH_NUM=N) sets the workers of the stage (default 1); every other flag is
 * Shoal's own. The Worker is the same as examples/calculate-exp.ts.
 */
import { Server, Worker, ValidationError } from "shoal";

export class CalculateExp extends Worker {
  forward(req: any): { y: number } {
    if (!("x" in req)) throw new ValidationError("cannot find key 'x'");
    const x = Number(req.x);
    if (Number.isNaN(x)) throw new ValidationError("cannot convert 'x' value to float");
    return { y: Math.exp(x) };
  }
}

// `--num` is ours, not Shoal's: take it out before Shoal parses the rest.
const argv = process.argv.slice(2);
let num = Number(process.env.BENCH_NUM ?? 1);
const at = argv.indexOf("--num");
if (at >= 0) {
  num = Number(argv[at + 1]);
  argv.splice(at, 2);
}
if (!Number.isInteger(num) || num < 1) {
  process.stderr.write("shoal-exp: --num (or BENCH_NUM) must be a whole number >= 1\n");
  process.exit(2);
}

const server = new Server();
server.appendWorker(CalculateExp, { num });
await server.run(argv);
