/**
 * A small dependency-free SVG line chart, enough for benchmark plots: a few series of (x, y) points,
 * linear or logarithmic x axis, a legend. No npm package, so plots render from a fresh clone.
 */

export interface Series {
  name: string;
  points: readonly (readonly [number, number])[];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  /** Logarithmic x axis (e.g. concurrency 1..128). */
  logX?: boolean;
  width?: number;
  height?: number;
}

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

// Round tick values: 1, 2 or 5 times a power of ten, about `count` of them over [0, max].
function ticks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) out.push(v);
  if (out[out.length - 1]! < max) out.push(out[out.length - 1]! + step);
  return out;
}

const label = (v: number) => (Math.abs(v) >= 1000 ? `${+(v / 1000).toFixed(1)}k` : String(+v.toPrecision(3)));

/** The chart as an SVG document. Points with a non-finite coordinate are left out. */
export function lineChart(series: readonly Series[], o: ChartOptions): string {
  const width = o.width ?? 720;
  const height = o.height ?? 420;
  const m = { left: 70, right: 170, top: 40, bottom: 50 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const clean = series.map((s) => ({ ...s, points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.logX || x > 0)) }));
  const xs = clean.flatMap((s) => s.points.map((p) => p[0]));
  const ys = clean.flatMap((s) => s.points.map((p) => p[1]));
  const yTicks = ticks(Math.max(0, ...ys));
  const yMax = yTicks[yTicks.length - 1]!;
  let xTicks: number[];
  let fx: (x: number) => number;
  if (o.logX) {
    xTicks = [...new Set(xs)].sort((a, b) => a - b);
    const lo = Math.log(Math.min(...xTicks, 1));
    const hi = Math.log(Math.max(...xTicks, 2));
    fx = (x) => m.left + ((Math.log(x) - lo) / (hi - lo)) * plotW;
  } else {
    xTicks = ticks(Math.max(0, ...xs));
    const xMax = xTicks[xTicks.length - 1]!;
    fx = (x) => m.left + (x / xMax) * plotW;
  }
  const fy = (y: number) => m.top + plotH - (y / yMax) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${m.left + plotW / 2}" y="22" text-anchor="middle" font-size="15">${esc(o.title)}</text>`,
  ];
  for (const t of yTicks) {
    const y = fy(t).toFixed(1);
    out.push(`<line x1="${m.left}" x2="${m.left + plotW}" y1="${y}" y2="${y}" stroke="#ddd"/>`, `<text x="${m.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${label(t)}</text>`);
  }
  for (const t of xTicks) {
    const x = fx(t).toFixed(1);
    out.push(`<line x1="${x}" x2="${x}" y1="${m.top}" y2="${m.top + plotH}" stroke="#eee"/>`, `<text x="${x}" y="${m.top + plotH + 16}" text-anchor="middle">${label(t)}</text>`);
  }
  out.push(
    `<rect x="${m.left}" y="${m.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#888"/>`,
    `<text x="${m.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text transform="translate(16 ${m.top + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  clean.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = s.points.map(([x, y]) => `${fx(x).toFixed(1)},${fy(y).toFixed(1)}`);
    if (pts.length > 1) out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(" ")}"/>`);
    for (const p of pts) {
      const [x, y] = p.split(",");
      out.push(`<circle cx="${x}" cy="${y}" r="3" fill="${color}"/>`);
    }
    const ly = m.top + 10 + i * 20;
    out.push(
      `<line x1="${width - m.right + 15}" x2="${width - m.right + 35}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${width - m.right + 40}" y="${ly}" dominant-baseline="middle">${esc(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
