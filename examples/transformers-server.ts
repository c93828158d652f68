/**
 * Sentence embeddings with a transformers.js feature-extraction pipeline, batched across clients.
 *
 *   POST /inference {"text": "fish swim in shoals"}  →  {"embedding": [0.013, -0.092, …]}
 *
 * The model is read from a local folder only, in the layout transformers.js loads (config.json,
 * tokenizer.json, tokenizer_config.json, onnx/model.onnx); nothing is downloaded. Run it with
 *
 *   MODEL_DIR=/path/to/all-MiniLM-L6-v2 node --import tsx examples/transformers-server.ts
 *
 * See docs/transformers.md, which also shows how to try it with a tiny generated model.
 */
import { basename, dirname, resolve } from "node:path";
import type { FeatureExtractionPipeline } from "@huggingface/transformers";
import { z } from "zod";
import { Server, typedBatch } from "shoal";

const MODEL_DIR = resolve(process.env.MODEL_DIR ?? "models/tiny-bert");

const Input = z.object({ text: z.string().min(1).max(10_000) });
const Output = z.object({ embedding: z.array(z.number()) });

export class Embed extends typedBatch(Input, Output) {
  example = { text: "warm-up" };
  #extract: FeatureExtractionPipeline | undefined;

  async init() {
    // Imported here rather than at the top: this module also runs in the server's own thread,
    // which never computes and need not load the model runtime.
    const { env, pipeline } = await import("@huggingface/transformers");
    env.allowRemoteModels = false; // a missing file is an error, never a download
    env.allowLocalModels = true;
    env.localModelPath = `${dirname(MODEL_DIR)}/`;
    env.useFSCache = false; // there are no downloads to cache
    this.#extract = await pipeline("feature-extraction", basename(MODEL_DIR), {
      device: "cpu",
      dtype: "fp32",
      // One thread per worker: the stage's `num` workers use the cores.
      session_options: { intraOpNumThreads: 1, interOpNumThreads: 1 },
    });
  }

  async forward(reqs: z.infer<typeof Input>[]) {
    // One call for the whole batch: the tokenizer pads to the longest text, the model runs once,
    // and mean pooling over the attention mask gives each text the same vector as alone.
    const output = await this.#extract!(
      reqs.map((r) => r.text),
      { pooling: "mean", normalize: true },
    );
    return (output.tolist() as number[][]).map((embedding) => ({ embedding }));
  }
}

const server = new Server();
server.appendWorker(Embed, { num: 2, maxBatchSize: 32, maxWaitMs: 5 });
server.run();
