/**
 * The second stage of /ocr: PaddleOCR's angle classifier on a batch of text boxes (of any
 * requests), each squeezed to at most 192 × 48; a box it finds upside down is turned 180°.
 */
import { OnnxWorker } from "shoal/onnx";
import { LINE_HEIGHT, LINE_MEAN, LINE_STD, ocrModelFiles } from "./ocr-models.js";
import { planar, resizeWidth, rotate180 } from "./pixels.js";
import type { TextBox } from "./text-box.js";

const WIDTH = 192;
/** How sure the classifier must be before a box is turned (PaddleOCR's cls_thresh). */
const TURN = 0.9;

export class Angle extends OnnxWorker {
  override model = ocrModelFiles().cls;

  override async forward(boxes: TextBox[]): Promise<TextBox[]> {
    const size = 3 * LINE_HEIGHT * WIDTH;
    const batch = new Float32Array(boxes.length * size);
    boxes.forEach(({ crop }, n) => planar(crop.width > WIDTH ? resizeWidth(crop, WIDTH) : crop, LINE_MEAN, LINE_STD, batch, n * size, WIDTH));
    const out = await this.run({ x: { type: "float32", shape: [boxes.length, 3, LINE_HEIGHT, WIDTH], data: batch } });
    const probs = Object.values(out)[0]!.data as Float32Array;
    // probs holds [0°, 180°] per box.
    return boxes.map((b, n) => (probs[n * 2 + 1]! > TURN ? { ...b, crop: rotate180(b.crop) } : b));
  }
}
