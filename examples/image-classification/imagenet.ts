/**
 * EfficientNet-Lite0 on ImageNet-1k (models/efficientnet-lite0/, made by `npm run models`): its
 * files, its input (224 × 224 RGB, normalised with ImageNet's mean and standard deviation, planar)
 * and its answer as the k most likely labels. For the route's two stages and the V2 model alike.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { modelsDir } from "../../scripts/models/models-dir.js";

/** The side of the square the model sees. */
export const SIDE = 224;
/** Elements of one image as the model takes it: [3, 224, 224]. */
export const IMAGE_ELEMENTS = 3 * SIDE * SIDE;

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];

/** The model's files in the models cache. */
export function modelFiles(): { model: string; labels: string } {
  const dir = join(modelsDir(), "efficientnet-lite0");
  return { model: join(dir, "efficientnet-lite0.onnx"), labels: join(dir, "labels.json") };
}

/** The 1000 class names, in the order of the model's outputs. */
export function readLabels(): string[] {
  return JSON.parse(readFileSync(modelFiles().labels, "utf8")) as string[];
}

/**
 * Pixels as the model takes them: `rgb` holds `count` images of 224 × 224 interleaved RGB bytes
 * (HWC); each becomes three planes of (x / 255 − mean) / std, written into `out` at `at`.
 */
export function normalise(rgb: Uint8Array, count = 1, out = new Float32Array(count * IMAGE_ELEMENTS), at = 0): Float32Array<ArrayBuffer> {
  const plane = SIDE * SIDE;
  for (let n = 0; n < count; n++) {
    const src = n * plane * 3;
    const dst = at + n * IMAGE_ELEMENTS;
    for (let c = 0; c < 3; c++) {
      const scale = 1 / (255 * STD[c]!);
      const shift = MEAN[c]! / STD[c]!;
      for (let i = 0; i < plane; i++) out[dst + c * plane + i] = rgb[src + i * 3 + c]! * scale - shift;
    }
  }
  return out as Float32Array<ArrayBuffer>;
}

/** One class and its probability. */
export interface Guess {
  label: string;
  score: number;
}

/** The `k` most likely classes of one image's 1000 probabilities, most likely first. */
export function topK(probs: Float32Array, k: number, labels: readonly string[]): Guess[] {
  const order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]!);
  return order.slice(0, k).map((i) => ({ label: labels[i]!, score: probs[i]! }));
}
