/**
 * Benchmark server: a worker per model, the alternative to the shared pool. One stage per
 * generated MLP, each `num: 1` with its own session and route `/<name>`, batching as the models
 * benchmark's repository settings do.
 *
 *   node --import tsx bench/servers/shoal-stages.ts --models-dir bench/.cache/models --count 20 --port 8000
 *
 * `--models-dir` holds `<name>/<name>.onnx` folders; `--count N` serves the first N by name.
 * Every other flag is Shoal's own. Each session gets one intra-op thread, as each model on a
 * shared pool of 2 workers does on 2 cores.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Server } from "shoal";
import { onnxWorker } from "shoal/onnx";

const argv = process.argv.slice(2);
function ours(flag: string): string {
  const at = argv.indexOf(flag);
  if (at < 0) {
    process.stderr.write(`shoal-stages: ${flag} is required\n`);
    process.exit(2);
  }
  return argv.splice(at, 2)[1]!;
}
const dir = ours("--models-dir");
const count = Number(ours("--count"));
const names = readdirSync(dir).sort().slice(0, count);

const server = new Server();
for (const name of names) {
  server.appendWorker(onnxWorker({ model: join(dir, name, `${name}.onnx`), intraOpThreads: 1 }), { num: 1, route: `/${name}`, maxBatchSize: 32, maxWaitMs: 5 });
}
await server.run(argv);
