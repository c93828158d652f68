/**
 * The third stage of /ocr: PP-OCRv4's recogniser on a batch of text boxes (of any requests).
 * Boxes are padded to a few widths so that those of one width share a run; each run's per-step
 * probabilities are read by greedy CTC decoding.
 */
import { OnnxWorker } from "shoal/onnx";
import { ctcGreedy } from "./ctc.js";
import { MAX_CROP_WIDTH } from "./detect.js";
import { LINE_HEIGHT, LINE_MEAN, LINE_STD, ocrModelFiles, readCharacters } from "./ocr-models.js";
import { bucketOf, planar } from "./pixels.js";
import type { ReadBox, TextBox } from "./text-box.js";

/**
 * The widths boxes are padded to, multiples of 8 (the recogniser reads one step per 8 columns),
 * close enough that a box wider than 160 pays at most half its width again in padding: a run's
 * cost grows with its width.
 */
const WIDTHS = [160, 240, 320, 480, 640, 960, MAX_CROP_WIDTH];

export class Recognise extends OnnxWorker {
  override model = ocrModelFiles().rec;
  #characters: string[] = [];

  override async init(): Promise<void> {
    await super.init();
    this.#characters = readCharacters();
  }

  override async forward(boxes: TextBox[]): Promise<ReadBox[]> {
    const results: ReadBox[] = new Array(boxes.length);
    const byWidth = new Map<number, number[]>();
    boxes.forEach(({ crop }, i) => {
      const width = bucketOf(crop.width, WIDTHS);
      byWidth.set(width, [...(byWidth.get(width) ?? []), i]);
    });
    for (const [width, at] of byWidth) {
      const size = 3 * LINE_HEIGHT * width;
      // Padding stays 0, the middle grey once normalised, as PaddleOCR pads.
      const batch = new Float32Array(at.length * size);
      at.forEach((i, n) => planar(boxes[i]!.crop, LINE_MEAN, LINE_STD, batch, n * size, width));
      const out = Object.values(await this.run({ x: { type: "float32", shape: [at.length, 3, LINE_HEIGHT, width], data: batch } }))[0]!;
      const [, steps, classes] = out.shape as [number, number, number];
      at.forEach((i, n) => {
        const reading = ctcGreedy(out.data as Float32Array, steps, classes, this.#characters, n * steps * classes);
        results[i] = { ...reading, box: boxes[i]!.box };
      });
    }
    return results;
  }
}
