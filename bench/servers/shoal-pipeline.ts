/**
 * Shoal side of the pipeline scenario, Mosec's headline design: a CPU preprocessing stage with two
 * workers feeding a batched model stage.
 *
 *   node --import tsx bench/servers/shoal-pipeline.ts --model bench/.cache/mlp-med.onnx --port 8000 --address 127.0.0.1
 *
 * A request is {"text": "..."}: Featurize hashes its byte bigrams into 256 buckets and
 * L2-normalises them (the same features as bench/peers/mosec_pipeline.py); the ONNX stage runs the
 * MLP on batches of up to 32 (5 ms wait) and answers {"output": [[...10 scores...]]}. `--model` is
 * ours; every other flag is Shoal's.
 */
import { Server, ValidationError, Worker } from "shoal";
import { onnxWorker } from "shoal/onnx";

const BUCKETS = 256;

export class Featurize extends Worker {
  forward(req: { text?: unknown }): { input: { data: Float32Array; shape: number[] } } {
    if (typeof req.text !== "string") throw new ValidationError('expected {"text": string}');
    const bytes = Buffer.from(req.text, "utf8");
    const counts = new Float32Array(BUCKETS);
    for (let i = 0; i + 1 < bytes.length; i++) counts[(bytes[i]! * 31 + bytes[i + 1]!) % BUCKETS]! += 1;
    let norm = 0;
    for (const c of counts) norm += c * c;
    norm = Math.sqrt(norm);
    if (norm > 0) for (let i = 0; i < BUCKETS; i++) counts[i]! /= norm;
    return { input: { data: counts, shape: [1, BUCKETS] } };
  }
}

const argv = process.argv.slice(2);
const at = argv.indexOf("--model");
const model = at >= 0 ? argv.splice(at, 2)[1] : undefined;
if (model === undefined) {
  process.stderr.write("shoal-pipeline: --model <file.onnx> is required\n");
  process.exit(2);
}

const server = new Server();
server.appendWorker(Featurize, { num: 2 });
server.appendWorker(onnxWorker({ model, intraOpThreads: 1 }), { num: 1, maxBatchSize: 32, maxWaitMs: 5 });
await server.run(argv);
