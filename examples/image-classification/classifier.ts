/**
 * The ONNX stage of /classify: EfficientNet-Lite0 on a batch of prepared images (image-prep.ts),
 * stacked into one run; each request gets `{"top": [{"label", "score"}, ...]}`, its k most likely
 * classes.
 */
import { OnnxWorker } from "shoal/onnx";
import { IMAGE_ELEMENTS, SIDE, modelFiles, readLabels, topK, type Guess } from "./imagenet.js";
import type { Prepared } from "./image-prep.js";

export class Classifier extends OnnxWorker {
  override model = modelFiles().model;
  // A warm-up run of one black image, as the CPU stage hands it over.
  override example: Prepared = { pixels: new Float32Array(IMAGE_ELEMENTS), k: 1 };
  #labels: string[] = [];

  override async init(): Promise<void> {
    await super.init();
    this.#labels = readLabels();
  }

  override async forward(items: Prepared[]): Promise<{ top: Guess[] }[]> {
    const batch = new Float32Array(items.length * IMAGE_ELEMENTS);
    items.forEach((item, i) => batch.set(item.pixels, i * IMAGE_ELEMENTS));
    const { probs } = await this.run({ input: { type: "float32", shape: [items.length, 3, SIDE, SIDE], data: batch } });
    const p = probs!.data as Float32Array;
    return items.map((item, i) => ({ top: topK(p.subarray(i * 1000, (i + 1) * 1000), item.k, this.#labels) }));
  }
}
