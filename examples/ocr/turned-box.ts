/**
 * Text set at a slant: a region's orientation from the second moments of its pixels, and the
 * rectangle along that orientation that holds them all, as DB post-processing's minimum-area
 * rectangle does for a line of text (for a long thin region the two agree).
 */
import type { Quad } from "./boxes.js";

/** A rectangle turned by `angle` radians (clockwise, y pointing down) about its centre. */
export interface TurnedBox {
  centre: [number, number];
  /** Along the text. */
  width: number;
  /** Across it. */
  height: number;
  angle: number;
}

/** Below this slant, in radians (2°), an axis-aligned box holds a line as well. */
const STRAIGHT = (2 * Math.PI) / 180;
/** A region this much longer than thick, as standard deviations along and across, is a line. */
const ELONGATED = 2;

/**
 * The turned box of the region whose pixels are `xs[i], ys[i]`, grown by `unclip` as the
 * axis-aligned boxes are; undefined when the region lies straight (within 2°), is no line (too
 * round for an orientation), or runs closer to vertical than horizontal (those are cropped
 * upright and turned a quarter, as before).
 */
export function turnedBox(xs: readonly number[], ys: readonly number[], unclip: number): TurnedBox | undefined {
  const n = xs.length;
  let mx = 0, my = 0;
  for (let i = 0; i < n; i++) {
    mx += xs[i]!;
    my += ys[i]!;
  }
  mx /= n;
  my /= n;
  let cxx = 0, cyy = 0, cxy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i]! - mx;
    const dy = ys[i]! - my;
    cxx += dx * dx;
    cyy += dy * dy;
    cxy += dx * dy;
  }
  const angle = 0.5 * Math.atan2(2 * cxy, cxx - cyy);
  const spread = Math.sqrt((cxx - cyy) ** 2 + 4 * cxy * cxy);
  const along = (cxx + cyy + spread) / 2;
  const across = (cxx + cyy - spread) / 2;
  if (Math.abs(angle) < STRAIGHT || Math.abs(angle) > Math.PI / 4 || along < ELONGATED ** 2 * Math.max(across, 1e-9)) return undefined;
  const [ux, uy] = [Math.cos(angle), Math.sin(angle)];
  let a0 = Infinity, a1 = -Infinity, b0 = Infinity, b1 = -Infinity;
  for (let i = 0; i < n; i++) {
    const dx = xs[i]! - mx;
    const dy = ys[i]! - my;
    const a = dx * ux + dy * uy;
    const b = dy * ux - dx * uy;
    a0 = Math.min(a0, a);
    a1 = Math.max(a1, a);
    b0 = Math.min(b0, b);
    b1 = Math.max(b1, b);
  }
  const w = a1 - a0 + 1;
  const h = b1 - b0 + 1;
  const grow = (w * h * unclip) / (2 * (w + h));
  const [a, b] = [(a0 + a1) / 2, (b0 + b1) / 2];
  // Pixel (x, y) covers x..x+1: its centre is half a pixel on.
  return { centre: [mx + 0.5 + a * ux - b * uy, my + 0.5 + a * uy + b * ux], width: w + 2 * grow, height: h + 2 * grow, angle };
}

/** `box` in pixels `scale` times as large (map pixels to image pixels). */
export function scaleTurned(box: TurnedBox, scale: number): TurnedBox {
  return { centre: [box.centre[0] * scale, box.centre[1] * scale], width: box.width * scale, height: box.height * scale, angle: box.angle };
}

/** The box's corners, clockwise from the top left of its text, rounded to pixels. */
export function turnedCorners(box: TurnedBox): Quad {
  const [ux, uy] = [Math.cos(box.angle), Math.sin(box.angle)];
  const corner = (a: number, b: number): [number, number] => [
    Math.round(box.centre[0] + (a * box.width * ux - b * box.height * uy) / 2),
    Math.round(box.centre[1] + (a * box.width * uy + b * box.height * ux) / 2),
  ];
  return [corner(-1, -1), corner(1, -1), corner(1, 1), corner(-1, 1)];
}
