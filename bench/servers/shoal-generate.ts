/**
 * The generate scenario's server: a text generator on `/generate` by the TextRequest/TextChunk
 * contract, batched continuously (sequences join and leave between steps, `BENCH_BATCHING=
 * continuous`) or per request (a batch runs until its longest sequence ends, `BENCH_BATCHING=
 * request`), at most `BENCH_MAX_BATCH` sequences at once either way. The model is the tiny
 * decoder of examples/generate (`MODEL_DIR`, which make-model.ts writes; the load asks for
 * `ignore_eos`, so the lengths are the load's), or, with `BENCH_MODEL=synthetic`, a stand-in
 * whose step costs `2 + 0.1·n` ms of CPU for n sequences.
 */
import { Server, StepWorker, TextRequest, type StepResult, type TextChunk } from "shoal";

interface Synthetic {
  left: number;
  made: number;
}

class SyntheticLM extends StepWorker<TextRequest, Synthetic, TextChunk> {
  static override input = TextRequest;

  join(inputs: TextRequest[]): Synthetic[] {
    return inputs.map((r) => ({ left: r.max_tokens ?? 16, made: 0 }));
  }

  step(active: Synthetic[]): StepResult<TextChunk>[] {
    const until = performance.now() + 2 + 0.1 * active.length;
    while (performance.now() < until);
    return active.map((seq) => {
      seq.made++;
      const done = --seq.left <= 0;
      return { chunk: done ? { text: " x", finish_reason: "length", usage: { prompt_tokens: 1, completion_tokens: seq.made } } : { text: " x" }, done };
    });
  }
}

const max = Number(process.env.BENCH_MAX_BATCH ?? 16);
const options = process.env.BENCH_BATCHING === "request" ? { route: "/generate", continuous: false, maxBatchSize: max, maxWaitMs: 5 } : { route: "/generate", maxActive: max };
const Model = process.env.BENCH_MODEL === "synthetic" ? SyntheticLM : (await import("../../examples/generate/gpt-worker.js")).TinyGpt;
const server = new Server();
server.appendWorker(Model, options);
await server.run();
