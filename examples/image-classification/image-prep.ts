/**
 * The CPU stage of /classify: reads a JPEG or PNG body with sharp, resizes it (short side 256,
 * centre 224 × 224) and normalises it into the Float32Array the model takes, which moves to the
 * ONNX stage without a copy. A body that is no such image, a truncated one, or one that declares
 * more than MAX_PIXELS pixels is a 422, found before anything of its size is allocated.
 */
import type { Sharp, SharpOptions } from "sharp";
import { ValidationError, Worker, type RequestMeta } from "shoal";
import { SIDE, normalise } from "./imagenet.js";

/** The short side an image is resized to before its centre SIDE × SIDE is taken. */
const RESIZE = 256;
const MARGIN = (RESIZE - SIDE) / 2;

/** The most pixels an image may declare (5000 × 5000): libvips refuses larger ones from their header. */
export const MAX_PIXELS = 25_000_000;

/** Classes a request gets by default, and at most (`?k=`). */
export const DEFAULT_K = 5;
export const MAX_K = 1000;

/** What the CPU stage hands the ONNX stage: one image, ready, and how many classes to answer. */
export interface Prepared {
  pixels: Float32Array;
  k: number;
}

export type Format = "jpeg" | "png";

/** A request as the CPU stage reads it: the image's bytes and format, and k. */
export interface ImageRequest {
  image: Uint8Array;
  format: Format;
  k: number;
}

/** The format of an image from its first bytes; undefined for anything but JPEG and PNG. */
export function sniff(bytes: Uint8Array): Format | undefined {
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "jpeg";
  const png = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  if (png.every((b, i) => bytes[i] === b)) return "png";
  return undefined;
}

/**
 * The request's image and k: the body must be a JPEG or PNG (told by its first bytes); an image
 * content-type, when given, must agree with them. `?k=` is 1 to 1000.
 */
export function readRequest(body: Uint8Array, meta?: RequestMeta): ImageRequest {
  const declared = String(meta?.headers["content-type"] ?? "").match(/^\s*image\/([\w.+-]+)/i)?.[1]?.toLowerCase();
  const format = sniff(body);
  if (declared !== undefined && declared !== "jpeg" && declared !== "jpg" && declared !== "png") {
    throw new ValidationError(`image/${declared} is not classified; send a JPEG or PNG image`);
  }
  if (format === undefined) throw new ValidationError("the body is not a JPEG or PNG image");
  if (declared !== undefined && (declared === "png") !== (format === "png")) {
    throw new ValidationError(`the body is a ${format.toUpperCase()} image, not image/${declared} as its content-type says`);
  }
  const raw = new URLSearchParams(meta?.query).get("k");
  const k = raw === null ? DEFAULT_K : /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(k >= 1 && k <= MAX_K)) throw new ValidationError(`k must be a whole number from 1 to ${MAX_K}; got '${raw}'`);
  return { image: body, format, k };
}

/** sharp's entry point, as the preparation takes it. */
export type SharpFn = (input: Uint8Array, options: SharpOptions) => Sharp;

/**
 * One image as the model takes it: its header's size checked first (reading it decodes no pixels,
 * so the answer can name it; the decoder refuses such an image too, should a header say one size
 * and the data another), then resized, its centre taken and normalised. An unreadable or too large
 * image is a ValidationError.
 */
export async function preparePixels(sharp: SharpFn, image: Uint8Array, format: Format): Promise<Float32Array<ArrayBuffer>> {
  const unreadable = (err: unknown) => new ValidationError(`the body is not a readable ${format.toUpperCase()} image: ${(err as Error).message}`);
  const { width = 0, height = 0 } = await sharp(image, { limitInputPixels: false }).metadata().catch((err: unknown) => {
    throw unreadable(err);
  });
  // An embedded ICC profile is not applied: the model learnt from pixels read without one (as
  // Pillow reads them), and the conversion would cost more than the decode itself.
  const input = sharp(image, { limitInputPixels: MAX_PIXELS, failOn: "truncated", ignoreIcc: true });
  if (width * height > MAX_PIXELS) throw new ValidationError(`the image is ${width} × ${height} pixels, more than ${MAX_PIXELS}`);
  let rgb: Buffer;
  try {
    rgb = await input.resize(RESIZE, RESIZE, { fit: "cover" }).extract({ left: MARGIN, top: MARGIN, width: SIDE, height: SIDE }).removeAlpha().toColourspace("srgb").raw().toBuffer();
  } catch (err) {
    throw unreadable(err);
  }
  return normalise(rgb);
}

export class ImagePrep extends Worker {
  #sharp!: SharpFn;

  override async init(): Promise<void> {
    const sharp = (await import("sharp")).default;
    // One image at a time per worker, nothing cached: memory stays one decode per worker.
    sharp.cache(false);
    sharp.concurrency(1);
    this.#sharp = sharp;
  }

  override decode(body: Uint8Array, meta?: RequestMeta): unknown {
    return readRequest(body, meta);
  }

  async forward(request: ImageRequest): Promise<Prepared> {
    return { pixels: await preparePixels(this.#sharp, request.image, request.format), k: request.k };
  }
}
