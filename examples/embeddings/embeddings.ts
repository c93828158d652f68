/**
 * The route's Worker, served on `/v1/embeddings` (and on its own route): each request is an
 * OpenAI embeddings body ({@link EmbeddingRequest}) and gets OpenAI's answer. Requests are
 * batched; the texts of all the requests of a batch share model runs by token count (minilm.ts).
 */
import { EmbeddingRequest, embeddingInputs, embeddingResponse, type EmbeddingResponse } from "shoal";
import { OnnxWorker } from "shoal/onnx";
import { MODEL_NAME, MiniLmTokenizer, embed, modelFiles } from "./minilm.js";

export class Embeddings extends OnnxWorker {
  static override readonly input = EmbeddingRequest;
  static override readonly batched = true;
  override model = modelFiles().model;
  // One thread per worker, and more workers rather than more threads: batches keep each busy.
  override sessionOptions = { intraOpThreads: 1 };
  override example = { model: MODEL_NAME, input: "warm-up" };
  #tokenizer!: MiniLmTokenizer;

  override async init(): Promise<void> {
    await super.init();
    this.#tokenizer = new MiniLmTokenizer();
  }

  override async forward(requests: EmbeddingRequest[]): Promise<(EmbeddingResponse | Error)[]> {
    // Each request's inputs as ids, or the error that fails it alone (a token id outside the vocabulary).
    const ids = requests.map((r) => {
      const inputs = embeddingInputs(r);
      try {
        return inputs.map((input, i) => this.#tokenizer.idsOf(input, inputs.length === 1 ? "input" : `input.${i}`));
      } catch (err) {
        return err as Error;
      }
    });
    const vectors = await embed(ids.flatMap((t) => (t instanceof Error ? [] : t)), (feeds) => this.run(feeds));
    let next = 0;
    return ids.map((t, i) => {
      if (t instanceof Error) return t;
      const mine = vectors.slice(next, (next += t.length));
      return embeddingResponse(requests[i]!, mine, t.reduce((sum, text) => sum + text.length, 0));
    });
  }
}
