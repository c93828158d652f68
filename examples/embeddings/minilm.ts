/**
 * Sentence embeddings with all-MiniLM-L6-v2 (models/minilm/, made by `npm run models`), for both
 * the route's Worker (embeddings.ts) and the V2 model (embeddings-model.ts): texts as token ids,
 * cut at the model's 512 positions; the texts of a batch in runs of similar length, each run
 * padded to its longest; mean pooling over the attention mask, then L2 normalisation.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { ClientError } from "shoal";
import { modelsDir } from "../../scripts/models/models-dir.js";
import { runsByWordCount, type RunModel } from "../sentiment/classify.js";

/** The name the model is served under, on /v1/embeddings and as a V2 model. */
export const MODEL_NAME = "all-MiniLM-L6-v2";
/** The most tokens the model reads ([CLS] and [SEP] included): its position embeddings. */
export const MAX_TOKENS = 512;
/** The length of each embedding. */
export const DIMENSIONS = 384;
/** The most token positions one run pads its texts to, in all: bounds a run's memory (attention is quadratic in length). */
export const RUN_TOKENS = 8192;
/**
 * How much padding a run may add: its padded positions at most this many times its tokens. A
 * padded position costs a transformer what a token costs, so runs are kept tight: with 2 (the
 * sentiment example's), a batch of mixed lengths ran slower than its texts one by one.
 */
export const RUN_SLACK = 1.25;
const SEP = 102;

/** The model's files, in the models cache: the graph with float32 matrix products (see scripts/models/dequantize-matmuls.ts) and the tokenizer. */
export function modelFiles(): { model: string; tokenizer: string } {
  const dir = join(modelsDir(), "minilm");
  return { model: join(dir, "onnx", "model.onnx"), tokenizer: join(dir, "tokenizer.json") };
}

/** Texts to token ids as the model reads them. */
export class MiniLmTokenizer {
  readonly #tokenizer: Tokenizer;
  /** How many token ids there are: a token array holds ids below it. */
  readonly vocabularySize: number;

  constructor(file = modelFiles().tokenizer) {
    const json = JSON.parse(readFileSync(file, "utf8")) as { model: { vocab: Record<string, number> } };
    this.vocabularySize = Object.keys(json.model.vocab).length;
    this.#tokenizer = new Tokenizer(json, {});
  }

  /** A text's ids, [CLS] … [SEP], its end cut off past {@link MAX_TOKENS} (as transformers.js truncates). */
  encode(text: string): number[] {
    const ids = this.#tokenizer.encode(text).ids;
    return ids.length <= MAX_TOKENS ? ids : [...ids.slice(0, MAX_TOKENS - 1), SEP];
  }

  /**
   * One input as ids: a text is tokenised; a token array is taken as the model's ids as they are
   * (a text's ids, [CLS] and [SEP] included, give that text's embedding), and refused when empty,
   * longer than {@link MAX_TOKENS} or holding an id outside the vocabulary (400).
   */
  idsOf(input: string | readonly number[], what: string): number[] {
    if (typeof input === "string") {
      if (input === "") throw new ClientError(`${what}: must not be empty`);
      return this.encode(input);
    }
    if (input.length === 0) throw new ClientError(`${what}: must hold at least one token`);
    if (input.length > MAX_TOKENS) throw new ClientError(`${what}: holds ${input.length} tokens; the model reads at most ${MAX_TOKENS}`);
    const bad = input.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= this.vocabularySize);
    if (bad >= 0) throw new ClientError(`${what}: token ${bad} (${input[bad]}) is not an id of the vocabulary (0 to ${this.vocabularySize - 1})`);
    return [...input];
  }
}

/**
 * The unit embedding of each text, given as its ids: one model run per run of similar length
 * ({@link runsByWordCount} on token counts, within {@link RUN_SLACK}), each text padded to its run's longest, the hidden
 * states averaged over its own tokens only, so a text gets the same vector alone or in a batch.
 */
export async function embed(texts: readonly (readonly number[])[], run: RunModel): Promise<Float32Array<ArrayBuffer>[]> {
  const results: Float32Array<ArrayBuffer>[] = new Array(texts.length);
  for (const at of runsByWordCount(texts.map((t) => t.length), RUN_TOKENS, RUN_SLACK)) {
    const width = Math.max(...at.map((i) => texts[i]!.length));
    const ids = new BigInt64Array(at.length * width);
    const mask = new BigInt64Array(at.length * width);
    at.forEach((i, row) => {
      texts[i]!.forEach((id, j) => {
        ids[row * width + j] = BigInt(id);
        mask[row * width + j] = 1n;
      });
    });
    const shape = [at.length, width];
    const { last_hidden_state: hidden } = await run({
      input_ids: { type: "int64", shape, data: ids },
      attention_mask: { type: "int64", shape, data: mask },
      token_type_ids: { type: "int64", shape, data: new BigInt64Array(at.length * width) },
    });
    const h = hidden!.data as Float32Array;
    at.forEach((i, row) => {
      const n = texts[i]!.length;
      const v = new Float32Array(DIMENSIONS);
      // Padding sits after a text's tokens, so its own are the first n positions.
      for (let j = 0; j < n; j++) {
        const base = (row * width + j) * DIMENSIONS;
        for (let d = 0; d < DIMENSIONS; d++) v[d]! += h[base + d]!;
      }
      let norm = 0;
      for (let d = 0; d < DIMENSIONS; d++) norm += v[d]! * v[d]!;
      // Dividing by n (the mean) and by the norm: the mean's scale cancels out in the norm.
      const scale = 1 / Math.max(Math.sqrt(norm), 1e-12);
      for (let d = 0; d < DIMENSIONS; d++) v[d]! *= scale;
      results[i] = v;
    });
  }
  return results;
}
