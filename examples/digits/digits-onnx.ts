/**
 * The digits model of digits.py exported to ONNX (export.py), served by a TypeScript stage: the
 * same requests and answers as the Python stage, a batch per run.
 */
import { z } from "zod";
import { OnnxWorker } from "shoal/onnx";
import { modelFile } from "./model-files.js";

/** One request: the 8 × 8 image, row by row, each pixel 0 to 16 (scikit-learn's digits). */
export const Input = z.object({ pixels: z.array(z.number().min(0).max(16)).length(64) });

export interface Answer {
  digit: number;
  score: number;
  probabilities: number[];
}

export class DigitsOnnx extends OnnxWorker {
  static override readonly input = Input;
  static override readonly batched = true;
  override model = modelFile();
  override sessionOptions = { intraOpThreads: 1 };
  override example = { pixels: new Array<number>(64).fill(0) };

  override async forward(requests: z.infer<typeof Input>[]): Promise<Answer[]> {
    const pixels = new Float32Array(requests.length * 64);
    requests.forEach((r, i) => pixels.set(r.pixels, i * 64));
    const { probabilities } = await this.run({ X: { type: "float32", shape: [requests.length, 64], data: pixels } });
    const p = probabilities!.data as Float32Array;
    return requests.map((_, i) => {
      const row = Array.from(p.subarray(i * 10, (i + 1) * 10));
      const digit = row.indexOf(Math.max(...row));
      return { digit, score: row[digit]!, probabilities: row };
    });
  }
}
