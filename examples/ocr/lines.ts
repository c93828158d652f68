/**
 * The last stage of /ocr: gathers an image's boxes as read, drops those read as nothing or with
 * little confidence, and answers `{"lines": [{"text", "score", "box"}]}` in reading order.
 */
import { Worker } from "shoal";
import { readingOrder } from "./boxes.js";
import type { ReadBox } from "./text-box.js";

/** Lines read with less confidence are dropped (PaddleOCR's drop_score). */
export const MIN_SCORE = 0.5;

export class Lines extends Worker {
  override forward(boxes: ReadBox[]): { lines: ReadBox[] } {
    const kept = boxes.filter((b) => b.text.trim() !== "" && b.score >= MIN_SCORE);
    return { lines: readingOrder(kept).map(({ text, score, box }) => ({ text: text.trim(), score, box })) };
  }
}
