/**
 * Text boxes from the detector's probability map, as DB post-processing does it with
 * axis-aligned boxes: pixels above a threshold, their 8-connected regions, each region's
 * bounding box grown by the unclip margin (the detector marks a shrunk core of each text), and
 * reading order.
 */

/** A box as four corners, clockwise from the top left, in the original image's pixels. */
export type Quad = [[number, number], [number, number], [number, number], [number, number]];

/** An axis-aligned box: left, top, right, bottom edges (right and bottom exclusive). */
export interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/**
 * How regions become boxes: PaddleOCR's defaults but for the unclip ratio, 2 rather than 1.5, as
 * with 1.5 the crop of a line ends at its glyphs and the recogniser reads an "o" there as "0".
 */
export interface BoxOptions {
  /** A pixel is text above this probability. */
  threshold: number;
  /** A region is kept when its mean probability is at least this. */
  minScore: number;
  /** The region grows by area × unclip / perimeter on each side. */
  unclip: number;
  /** Regions whose shorter side is below this many map pixels are noise. */
  minSide: number;
}

export const BOX_OPTIONS: BoxOptions = { threshold: 0.3, minScore: 0.6, unclip: 2, minSide: 3 };

/**
 * The text boxes of the map's top-left `width` × `height` pixels (`map` rows are `stride` wide,
 * from `at`), in map pixels, clamped to that area.
 */
export function textBoxes(map: Float32Array, width: number, height: number, stride: number, at = 0, options = BOX_OPTIONS): Rect[] {
  const seen = new Uint8Array(width * height);
  const stack: number[] = [];
  const boxes: Rect[] = [];
  for (let start = 0; start < width * height; start++) {
    if (seen[start] || !(map[at + (start / width | 0) * stride + (start % width)]! > options.threshold)) continue;
    let left = width, top = height, right = 0, bottom = 0, sum = 0, count = 0;
    seen[start] = 1;
    stack.push(start);
    while (stack.length > 0) {
      const p = stack.pop()!;
      const x = p % width;
      const y = (p / width) | 0;
      sum += map[at + y * stride + x]!;
      count++;
      left = Math.min(left, x);
      right = Math.max(right, x + 1);
      top = Math.min(top, y);
      bottom = Math.max(bottom, y + 1);
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          const ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
          const q = ny * width + nx;
          if (seen[q] || !(map[at + ny * stride + nx]! > options.threshold)) continue;
          seen[q] = 1;
          stack.push(q);
        }
      }
    }
    const w = right - left;
    const h = bottom - top;
    if (Math.min(w, h) < options.minSide || sum / count < options.minScore) continue;
    const grow = (w * h * options.unclip) / (2 * (w + h));
    boxes.push({
      left: Math.max(0, Math.floor(left - grow)),
      top: Math.max(0, Math.floor(top - grow)),
      right: Math.min(width, Math.ceil(right + grow)),
      bottom: Math.min(height, Math.ceil(bottom + grow)),
    });
  }
  return boxes;
}

/** `box` scaled by `scale` (map pixels to image pixels) and clamped to a `width` × `height` image. */
export function scaleRect(box: Rect, scale: number, width: number, height: number): Rect {
  const r = {
    left: Math.max(0, Math.floor(box.left * scale)),
    top: Math.max(0, Math.floor(box.top * scale)),
    right: Math.min(width, Math.ceil(box.right * scale)),
    bottom: Math.min(height, Math.ceil(box.bottom * scale)),
  };
  return { ...r, right: Math.max(r.right, r.left + 1), bottom: Math.max(r.bottom, r.top + 1) };
}

/** The four corners of a rectangle. */
export function quadOf(r: Rect): Quad {
  return [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]];
}

/**
 * Boxes in reading order: top to bottom, and left to right among boxes on one line (whose
 * vertical middles lie within each other's extent).
 */
export function readingOrder<T extends { box: Quad }>(items: readonly T[]): T[] {
  const byTop = [...items].sort((a, b) => a.box[0][1] - b.box[0][1] || a.box[0][0] - b.box[0][0]);
  const lines: T[][] = [];
  for (const item of byTop) {
    const mid = (item.box[0][1] + item.box[2][1]) / 2;
    const line = lines.find((l) => l.some((o) => mid >= o.box[0][1] && mid <= o.box[2][1]));
    if (line === undefined) lines.push([item]);
    else line.push(item);
  }
  return lines.flatMap((line) => line.sort((a, b) => a.box[0][0] - b.box[0][0]));
}
