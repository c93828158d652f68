/** What travels between the OCR stages for each text box: one sub-item of an image. */
import type { Quad } from "./boxes.js";
import type { Reading } from "./ctc.js";
import type { Rgb } from "./pixels.js";

/** A box's crop (LINE_HEIGHT rows, upright as far as the detector knows) and where it was. */
export interface TextBox {
  crop: Rgb;
  box: Quad;
}

/** A box read: its text, the recogniser's confidence, and where it was. */
export interface ReadBox extends Reading {
  box: Quad;
}
