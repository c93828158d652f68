/**
 * The same model as a V2 model (`/v2/models/all-MiniLM-L6-v2/infer`): input `text` BYTES [N], one
 * text per element; output `embedding` FP32 [N, 384], unit vectors. The texts of all the requests
 * of a batch are embedded together, in runs by token count (minilm.ts).
 */
import { ModelWorker, ValidationError, type ModelInput, type ModelOutput } from "shoal";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { DIMENSIONS, MiniLmTokenizer, embed, modelFiles } from "./minilm.js";

const decoder = new TextDecoder("utf-8", { fatal: true });

export default class EmbeddingsModel extends ModelWorker {
  // Always a list of requests, even one, as the route's Worker gets them.
  static override batched = true;
  #session!: InferenceSession;
  #Tensor!: typeof Tensor;
  #tokenizer!: MiniLmTokenizer;

  override async init(): Promise<void> {
    const ort = await import("onnxruntime-node");
    this.#Tensor = ort.Tensor;
    this.#session = await ort.InferenceSession.create(modelFiles().model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    this.#tokenizer = new MiniLmTokenizer();
  }

  override async forward(requests: ModelInput[]): Promise<(ModelOutput | Error)[]> {
    const ids = requests.map((r) => {
      try {
        return textsOf(r).map((text) => this.#tokenizer.encode(text));
      } catch (err) {
        return err as Error;
      }
    });
    const vectors = await embed(ids.flatMap((t) => (t instanceof Error ? [] : t)), async (feeds) => {
      const inputs: Record<string, Tensor> = {};
      for (const [name, { type, shape, data }] of Object.entries(feeds)) inputs[name] = new this.#Tensor(type, data, shape);
      const { last_hidden_state: out } = await this.#session.run(inputs);
      return { last_hidden_state: { type: "float32", shape: [...out!.dims], data: out!.data as Float32Array<ArrayBuffer> } };
    });
    let next = 0;
    return ids.map((t) => {
      if (t instanceof Error) return t;
      const data = new Float32Array(t.length * DIMENSIONS);
      vectors.slice(next, (next += t.length)).forEach((v, i) => data.set(v, i * DIMENSIONS));
      return { embedding: { datatype: "FP32", shape: [t.length, DIMENSIONS], data } };
    });
  }
}

// The request's texts: UTF-8, none empty.
function textsOf({ inputs }: ModelInput): string[] {
  return (inputs.text!.data as Uint8Array[]).map((bytes, i) => {
    let s: string;
    try {
      s = decoder.decode(bytes);
    } catch {
      throw new ValidationError(`input 'text': element ${i} is not UTF-8`);
    }
    if (s === "") throw new ValidationError(`input 'text': element ${i} must not be empty`);
    return s;
  });
}
