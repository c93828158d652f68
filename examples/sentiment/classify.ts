/**
 * Sentiment of texts with the dracula-sentiment model (models/sentiment/, made by `npm run
 * models`), for both the route's Worker (sentiment.ts) and the V2 model (sentiment-model.ts):
 * texts as words, texts of a batch in runs of similar length, probabilities as a label and a score.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TensorValue } from "shoal/onnx";
import { draculaInputs, type DraculaVocabulary } from "../../scripts/models/dracula-inputs.js";
import { modelsDir } from "../../scripts/models/models-dir.js";

/** The most words one text may have: the model was trained on sentences and short reviews. */
export const MAX_WORDS = 1000;

/** The most words one run pads its texts to, in all: bounds a run's memory (the character LSTM alone writes 5 KB a word). */
export const RUN_WORDS = 4096;

/** What one text gets. */
export interface Sentiment {
  label: "positive" | "negative";
  /** The model's probability of that label. */
  score: number;
}

/** The model's files: the graph and its vocabulary, in the models cache. */
export function modelFiles(): { model: string; vocabulary: string } {
  const dir = join(modelsDir(), "sentiment");
  return { model: join(dir, "sentiment.onnx"), vocabulary: join(dir, "vocabulary.json") };
}

/** Reads the vocabulary of {@link modelFiles}. */
export function readVocabulary(): DraculaVocabulary {
  return JSON.parse(readFileSync(modelFiles().vocabulary, "utf8")) as DraculaVocabulary;
}

/**
 * The texts of a batch, by index, in runs that share one model run. Every text of a run is padded
 * to the run's longest, so texts are taken shortest first and a run ends where padding would make
 * it more than `slack` times its words (twice by default), or more than `maxPadded` words in all:
 * a batch of short sentences is one run, and a long text does not make 31 short ones cost what it
 * costs.
 */
export function runsByWordCount(counts: readonly number[], maxPadded = RUN_WORDS, slack = 2): number[][] {
  const order = counts.map((_, i) => i).sort((a, b) => counts[a]! - counts[b]!);
  const runs: number[][] = [];
  let run: number[] = [];
  let words = 0;
  for (const i of order) {
    const n = counts[i]!;
    const padded = (run.length + 1) * n;
    if (run.length > 0 && (padded > slack * (words + n) || padded > maxPadded)) {
      runs.push(run);
      run = [];
      words = 0;
    }
    run.push(i);
    words += n;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/** Runs the model once on tensors by input name; gives its outputs by name. */
export type RunModel = (feeds: Record<string, TensorValue>) => Promise<Record<string, TensorValue>>;

/**
 * The sentiment of each text, given as its words (1 to {@link MAX_WORDS} of them): one model run
 * per run of {@link runsByWordCount}, each text with its own number of words (`word_lens`).
 */
export async function classify(texts: readonly (readonly string[])[], vocabulary: DraculaVocabulary, run: RunModel): Promise<Sentiment[]> {
  const results: Sentiment[] = new Array(texts.length);
  for (const at of runsByWordCount(texts.map((t) => t.length))) {
    const { charIds, wordLens, shape } = draculaInputs(at.map((i) => texts[i]!), vocabulary);
    const { probs } = await run({
      char_ids: { type: "int64", shape, data: charIds },
      word_lens: { type: "int32", shape: [at.length], data: wordLens },
    });
    const p = probs!.data as Float32Array;
    // [negative, neutral, positive]; neutral is near 0, and the package's own labels are the other two.
    at.forEach((i, j) => {
      const negative = p[3 * j]!;
      const positive = p[3 * j + 2]!;
      results[i] = positive > negative ? { label: "positive", score: positive } : { label: "negative", score: negative };
    });
  }
  return results;
}
