/**
 * The first stage of /ocr: reads each image with sharp, scales it into one of a few size buckets
 * (both sides multiples of 32, padded) so that images of one bucket share a detector run, finds
 * the text boxes in the probability map, and fans the image out into one sub-item per box: its
 * crop at the recogniser's height, as RGB bytes, and its corners in the image.
 */
import type { Sharp, SharpOptions } from "sharp";
import { fanOut, ValidationError, type FanOut } from "shoal";
import { OnnxWorker } from "shoal/onnx";
import { MAX_PIXELS, sniff } from "../image-classification/image-prep.js";
import { quadOf, scaleRect, textBoxes, type Rect } from "./boxes.js";
import { scaleTurned, turnedCorners, type TurnedBox } from "./turned-box.js";
import { DET_MEAN, DET_STD, LINE_HEIGHT, ocrModelFiles } from "./ocr-models.js";
import { bucketOf, planar, type Rgb } from "./pixels.js";
import type { TextBox } from "./text-box.js";

/** The sides an image is padded to; a longer side is scaled down to the last. */
const SIDES = [160, 320, 640, 960, 1280];
/** The widest crop the recogniser gets (its widest bucket); longer lines are squeezed. */
export const MAX_CROP_WIDTH = 1280;

/** A request: the image's bytes and its format. */
export interface OcrRequest {
  image: Uint8Array;
  format: "jpeg" | "png";
}

/** An image decoded and scaled for the detector. */
interface Scaled {
  original: Rgb;
  scaled: Rgb;
  bucket: string;
}

export class Detect extends OnnxWorker {
  override model = ocrModelFiles().det;
  #sharp!: (input: Uint8Array, options?: SharpOptions) => Sharp;

  override async init(): Promise<void> {
    await super.init();
    const sharp = (await import("sharp")).default;
    sharp.cache(false);
    sharp.concurrency(1);
    this.#sharp = sharp;
  }

  /** The body must be a JPEG or PNG, told by its first bytes. */
  override decode(body: Uint8Array): OcrRequest {
    const format = sniff(body);
    if (format === undefined) throw new ValidationError("the body is not a JPEG or PNG image");
    return { image: body, format };
  }

  override async forward(requests: OcrRequest[]): Promise<(FanOut<TextBox> | Error)[]> {
    const images = await Promise.all(requests.map((r) => this.#read(r).catch((err: unknown) => err as Error)));
    const results: (FanOut<TextBox> | Error)[] = new Array(requests.length);
    const buckets = new Map<string, number[]>();
    images.forEach((image, i) => {
      if (image instanceof Error) results[i] = image;
      else buckets.set(image.bucket, [...(buckets.get(image.bucket) ?? []), i]);
    });
    for (const [bucket, at] of buckets) {
      const [width, height] = bucket.split("x").map(Number) as [number, number];
      const batch = new Float32Array(at.length * 3 * width * height);
      at.forEach((i, n) => planar((images[i] as Scaled).scaled, DET_MEAN, DET_STD, batch, n * 3 * width * height, width, height));
      const out = await this.run({ x: { type: "float32", shape: [at.length, 3, height, width], data: batch } });
      const map = Object.values(out)[0]!.data as Float32Array;
      for (const [n, i] of at.entries()) {
        const { original, scaled } = images[i] as Scaled;
        const found = textBoxes(map, scaled.width, scaled.height, width, n * width * height);
        const scale = original.width / scaled.width;
        const crops = found.map((r) => ("angle" in r ? this.#cropTurned(original, scaleTurned(r, scale)) : this.#crop(original, scaleRect(r, scale, original.width, original.height))));
        results[i] = fanOut(await Promise.all(crops));
      }
    }
    return results;
  }

  // The image as RGB bytes, and scaled to fit its bucket; a 422 when it is no readable image.
  async #read({ image, format }: OcrRequest): Promise<Scaled> {
    const unreadable = (err: unknown) => new ValidationError(`the body is not a readable ${format.toUpperCase()} image: ${(err as Error).message}`);
    const { width = 0, height = 0 } = await this.#sharp(image, { limitInputPixels: false }).metadata().catch((err: unknown) => {
      throw unreadable(err);
    });
    if (width * height > MAX_PIXELS) throw new ValidationError(`the image is ${width} × ${height} pixels, more than ${MAX_PIXELS}`);
    const decoded = await this.#sharp(image, { limitInputPixels: MAX_PIXELS, failOn: "truncated" })
      .removeAlpha()
      .toColourspace("srgb")
      .raw()
      .toBuffer({ resolveWithObject: true })
      .catch((err: unknown) => {
        throw unreadable(err);
      });
    const original: Rgb = { data: decoded.data, width: decoded.info.width, height: decoded.info.height };
    const scale = Math.min(1, SIDES.at(-1)! / Math.max(original.width, original.height));
    let scaled = original;
    if (scale < 1) {
      const w = Math.max(1, Math.round(original.width * scale));
      const h = Math.max(1, Math.round(original.height * scale));
      scaled = { data: await this.#raw(original).resize(w, h, { fit: "fill" }).raw().toBuffer(), width: w, height: h };
    }
    return { original, scaled, bucket: `${bucketOf(scaled.width, SIDES)}x${bucketOf(scaled.height, SIDES)}` };
  }

  // One box of the image at LINE_HEIGHT rows, its width in proportion; a box much taller than
  // wide is taken as vertical text and turned a quarter anticlockwise first, as PaddleOCR does.
  async #crop(image: Rgb, r: Rect): Promise<TextBox> {
    let w = r.right - r.left;
    let h = r.bottom - r.top;
    let crop = this.#raw(image).extract({ left: r.left, top: r.top, width: w, height: h });
    if (h >= 1.5 * w) {
      crop = this.#raw({ data: await crop.raw().toBuffer(), width: w, height: h }).rotate(270);
      [w, h] = [h, w];
    }
    return { crop: await this.#lineHeight(crop, w, h), box: quadOf(r) };
  }

  // A box set at a slant: the square around it that holds it at any angle is cut out and turned
  // level (its centre stays the square's), then the box is cut from the middle.
  async #cropTurned(image: Rgb, box: TurnedBox): Promise<TextBox> {
    const half = Math.ceil(Math.hypot(box.width, box.height) / 2) + 1;
    const left = Math.max(0, Math.floor(box.centre[0] - half));
    const top = Math.max(0, Math.floor(box.centre[1] - half));
    const region = { left, top, width: Math.min(image.width, Math.ceil(box.centre[0] + half)) - left, height: Math.min(image.height, Math.ceil(box.centre[1] + half)) - top };
    const level = await this.#raw(image)
      .extract(region)
      .rotate((-box.angle * 180) / Math.PI, { background: { r: 255, g: 255, b: 255 } })
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    // Where the box's centre went: turned by −angle about the region's centre, which became the
    // turned image's.
    const [dx, dy] = [box.centre[0] - left - region.width / 2, box.centre[1] - top - region.height / 2];
    const [c, s] = [Math.cos(box.angle), Math.sin(box.angle)];
    const [x, y] = [level.info.width / 2 + c * dx + s * dy, level.info.height / 2 - s * dx + c * dy];
    const cut = {
      left: Math.max(0, Math.round(x - box.width / 2)),
      top: Math.max(0, Math.round(y - box.height / 2)),
    };
    const w = Math.max(1, Math.min(level.info.width - cut.left, Math.round(box.width)));
    const h = Math.max(1, Math.min(level.info.height - cut.top, Math.round(box.height)));
    const crop = this.#raw({ data: level.data, width: level.info.width, height: level.info.height }).extract({ ...cut, width: w, height: h });
    return { crop: await this.#lineHeight(crop, w, h), box: turnedCorners(box) };
  }

  // The crop at LINE_HEIGHT rows, its width in proportion: a copy of its own, so that it moves
  // to the next stage's thread whole.
  async #lineHeight(crop: Sharp, w: number, h: number): Promise<Rgb> {
    const width = Math.min(MAX_CROP_WIDTH, Math.max(8, Math.round((w * LINE_HEIGHT) / h)));
    const data = new Uint8Array(await crop.resize(width, LINE_HEIGHT, { fit: "fill" }).raw().toBuffer());
    return { data, width, height: LINE_HEIGHT };
  }

  #raw(image: Rgb): Sharp {
    return this.#sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });
  }
}
