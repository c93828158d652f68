/**
 * Text boxes from the detector's probability map, as DB post-processing does it: pixels above a
 * threshold, their 8-connected regions, each region's box grown by the unclip margin (the
 * detector marks a shrunk core of each text), and reading order. A region that lies straight gets
 * its bounding box; a line set at a slant, a box turned along it (turned-box.ts).
 */
import { turnedBox, type TurnedBox } from "./turned-box.js";

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
 * from `at`), in map pixels: axis-aligned ones clamped to that area, turned ones as found.
 */
export function textBoxes(map: Float32Array, width: number, height: number, stride: number, at = 0, options = BOX_OPTIONS): (Rect | TurnedBox)[] {
  const seen = new Uint8Array(width * height);
  const stack: number[] = [];
  const boxes: (Rect | TurnedBox)[] = [];
  const xs: number[] = [];
  const ys: number[] = [];
  for (let start = 0; start < width * height; start++) {
    if (seen[start] || !(map[at + (start / width | 0) * stride + (start % width)]! > options.threshold)) continue;
    let left = width, top = height, right = 0, bottom = 0, sum = 0, count = 0;
    xs.length = 0;
    ys.length = 0;
    seen[start] = 1;
    stack.push(start);
    while (stack.length > 0) {
      const p = stack.pop()!;
      const x = p % width;
      const y = (p / width) | 0;
      sum += map[at + y * stride + x]!;
      count++;
      xs.push(x);
      ys.push(y);
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
    const turned = turnedBox(xs, ys, options.unclip);
    if (turned !== undefined) {
      boxes.push(turned);
      continue;
    }
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
 * Boxes in reading order: down the page, and along it among boxes on one line (a box whose
 * centre lies within another's height). "Down" and "along" follow the boxes' mean direction, so
 * that a page photographed at a slant reads as a straight one.
 */
export function readingOrder<T extends { box: Quad }>(items: readonly T[]): T[] {
  const boxes = items.map((item) => {
    const [[x0, y0], [x1, y1], , [x3, y3]] = item.box;
    const length = Math.hypot(x1 - x0, y1 - y0) || 1;
    const centre = item.box.reduce(([x, y], [bx, by]) => [x + bx / 4, y + by / 4], [0, 0]);
    return { item, centre, u: [(x1 - x0) / length, (y1 - y0) / length], height: Math.hypot(x3 - x0, y3 - y0) };
  });
  const [sx, sy] = boxes.reduce(([x, y], b) => [x + b.u[0]!, y + b.u[1]!], [0, 0]);
  const norm = Math.hypot(sx, sy);
  const [ux, uy] = norm > 0 ? [sx / norm, sy / norm] : [1, 0];
  const down = (b: (typeof boxes)[number]) => b.centre[1]! * ux - b.centre[0]! * uy;
  const along = (b: (typeof boxes)[number]) => b.centre[0]! * ux + b.centre[1]! * uy;
  const lines: (typeof boxes)[] = [];
  for (const box of [...boxes].sort((a, b) => down(a) - down(b))) {
    const line = lines.find((l) => l.some((o) => Math.abs(down(box) - down(o)) <= o.height / 2));
    if (line === undefined) lines.push([box]);
    else line.push(box);
  }
  return lines.flatMap((line) => line.sort((a, b) => along(a) - along(b)).map((b) => b.item));
}
