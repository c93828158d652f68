/**
 * The route's Worker: `POST /sentiment` with `{"text": "..."}` answers
 * `{"label": "positive" | "negative", "score": 0..1}`. Requests are batched; the texts of a batch
 * share model runs by word count (classify.ts).
 */
import { z } from "zod";
import { OnnxWorker } from "shoal/onnx";
import { words, type DraculaVocabulary } from "../../scripts/models/dracula-inputs.js";
import { MAX_WORDS, classify, modelFiles, readVocabulary, type Sentiment as Answer } from "./classify.js";

/** One request: a text of 1 to {@link MAX_WORDS} words (split on spaces, as the model splits). */
export const Input = z.object({
  text: z
    .string()
    .refine((t) => words(t).length > 0, "must hold at least one word")
    .refine((t) => words(t).length <= MAX_WORDS, `must hold at most ${MAX_WORDS} words`),
});

/** One answer. */
export const Output = z.object({
  label: z.enum(["positive", "negative"]),
  score: z.number().min(0).max(1),
});

export class Sentiment extends OnnxWorker {
  static override readonly input = Input;
  static override readonly output = Output;
  static override readonly batched = true;
  override model = modelFiles().model;
  // A small recurrent model: one thread per worker, and more workers rather than more threads.
  override sessionOptions = { intraOpThreads: 1 };
  override example = { text: "What a wonderful day" };
  #vocabulary!: DraculaVocabulary;

  override async init(): Promise<void> {
    await super.init();
    this.#vocabulary = readVocabulary();
  }

  override forward(requests: z.infer<typeof Input>[]): Promise<Answer[]> {
    return classify(requests.map((r) => words(r.text)), this.#vocabulary, (feeds) => this.run(feeds));
  }
}
