/**
 * The same model as a V2 model (`/v2/models/sentiment/infer`): input `text` BYTES [N], one text
 * per element; outputs `label` BYTES [N] ("positive" or "negative") and `score` FP32 [N]. The
 * texts of all the requests of a batch are classified together, in runs by word count.
 */
import { ModelWorker, ValidationError, type ModelInput, type ModelOutput } from "shoal";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { words, type DraculaVocabulary } from "../../scripts/models/dracula-inputs.js";
import { MAX_WORDS, classify, modelFiles, readVocabulary } from "./classify.js";

const decoder = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

export default class SentimentModel extends ModelWorker {
  // Always a list of requests, even one, as the route's Worker gets them.
  static override batched = true;
  #session!: InferenceSession;
  #Tensor!: typeof Tensor;
  #vocabulary!: DraculaVocabulary;

  override async init(): Promise<void> {
    const ort = await import("onnxruntime-node");
    this.#Tensor = ort.Tensor;
    this.#session = await ort.InferenceSession.create(modelFiles().model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    this.#vocabulary = readVocabulary();
  }

  override async forward(requests: ModelInput[]): Promise<(ModelOutput | Error)[]> {
    // Each request's texts as words, or the error that fails it alone.
    const texts = requests.map((r) => {
      try {
        return textsOf(r);
      } catch (err) {
        return err as Error;
      }
    });
    const all = texts.flatMap((t) => (t instanceof Error ? [] : t));
    const answers = await classify(all, this.#vocabulary, async (feeds) => {
      const inputs: Record<string, Tensor> = {};
      for (const [name, { type, shape, data }] of Object.entries(feeds)) inputs[name] = new this.#Tensor(type, data, shape);
      const { probs } = await this.#session.run(inputs);
      return { probs: { type: "float32", shape: [...probs!.dims], data: probs!.data as Float32Array<ArrayBuffer> } };
    });
    let next = 0;
    return texts.map((t) => {
      if (t instanceof Error) return t;
      const mine = answers.slice(next, (next += t.length));
      return {
        label: { datatype: "BYTES", shape: [mine.length], data: mine.map((a) => encoder.encode(a.label)) },
        score: { datatype: "FP32", shape: [mine.length], data: Float32Array.from(mine, (a) => a.score) },
      };
    });
  }
}

// The request's texts, each as its words: 1 to MAX_WORDS words of UTF-8 each.
function textsOf({ inputs }: ModelInput): string[][] {
  const text = inputs.text!;
  return (text.data as Uint8Array[]).map((bytes, i) => {
    let s: string;
    try {
      s = decoder.decode(bytes);
    } catch {
      throw new ValidationError(`input 'text': element ${i} is not UTF-8`);
    }
    const w = words(s);
    if (w.length === 0) throw new ValidationError(`input 'text': element ${i} must hold at least one word`);
    if (w.length > MAX_WORDS) throw new ValidationError(`input 'text': element ${i} must hold at most ${MAX_WORDS} words`);
    return w;
  });
}
