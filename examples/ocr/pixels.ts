/**
 * Pixel work of the OCR stages: interleaved RGB bytes (HWC, as sharp gives them) into the
 * models' planar float input, resampled, turned.
 */

/** A crop as the stages pass it on: interleaved RGB bytes, `height` rows of `width` pixels. */
export interface Rgb {
  data: Uint8Array;
  width: number;
  height: number;
}

/**
 * Writes `image` into `out` (one [3, H, W] plane set starting at `at`, W = `rowWidth` ≥ its
 * width; the rest of each row is left as it is) as (x / 255 − mean) / std per channel.
 */
export function planar(image: Rgb, mean: readonly number[], std: readonly number[], out: Float32Array, at: number, rowWidth: number, rows = image.height): void {
  const plane = rows * rowWidth;
  for (let c = 0; c < 3; c++) {
    const scale = 1 / (255 * std[c]!);
    const shift = mean[c]! / std[c]!;
    for (let y = 0; y < image.height; y++) {
      const src = y * image.width * 3 + c;
      const dst = at + c * plane + y * rowWidth;
      for (let x = 0; x < image.width; x++) out[dst + x] = image.data[src + x * 3]! * scale - shift;
    }
  }
}

/** `image` resampled to `width` columns (rows unchanged), linearly between pixel centres. */
export function resizeWidth(image: Rgb, width: number): Rgb {
  const out = new Uint8Array(image.height * width * 3);
  const ratio = image.width / width;
  for (let x = 0; x < width; x++) {
    const s = Math.min(Math.max((x + 0.5) * ratio - 0.5, 0), image.width - 1);
    const x0 = Math.floor(s);
    const x1 = Math.min(x0 + 1, image.width - 1);
    const f = s - x0;
    for (let y = 0; y < image.height; y++) {
      const row = y * image.width * 3;
      for (let c = 0; c < 3; c++) {
        out[(y * width + x) * 3 + c] = Math.round(image.data[row + x0 * 3 + c]! * (1 - f) + image.data[row + x1 * 3 + c]! * f);
      }
    }
  }
  return { data: out, width, height: image.height };
}

/** `image` turned by 180°: its pixels in reverse order (the buffer is reused). */
export function rotate180(image: Rgb): Rgb {
  const d = image.data;
  for (let i = 0, j = d.length - 3; i < j; i += 3, j -= 3) {
    for (let c = 0; c < 3; c++) {
      const t = d[i + c]!;
      d[i + c] = d[j + c]!;
      d[j + c] = t;
    }
  }
  return image;
}

/** The smallest of `buckets` (ascending) that holds `size`, or the largest. */
export function bucketOf(size: number, buckets: readonly number[]): number {
  return buckets.find((b) => b >= size) ?? buckets.at(-1)!;
}
