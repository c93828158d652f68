/**
 * What `shoal bench` writes: a table for the terminal, CSV and JSON for tools, and an SVG plot of
 * latency against throughput, one line per sweep and percentile.
 */
import type { LevelResult } from "./levels.js";
import { lineChart, type Series } from "./svg.js";

const COLUMNS = ["mode", "level", "requests", "req_per_sec", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "errors", "error_kinds", "batch_size", "queue_ms", "windows", "stable"] as const;
const STREAM_COLUMNS = ["ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tokens_per_sec"] as const;

/** The errors by kind, as `HTTP 503 x12; ECONNRESET x1`. */
function errorKinds(r: LevelResult): string {
  return Object.entries(r.errorKinds)
    .map(([kind, n]) => `${kind} x${n}`)
    .join("; ");
}

const fixed = (v: number, digits: number) => (Number.isFinite(v) ? v.toFixed(digits) : "");

// Each result's fields by column, as text.
function cells(r: LevelResult, streams: boolean): Record<string, string> {
  const row: Record<string, string> = {
    mode: r.mode,
    level: String(r.value),
    requests: String(r.requests),
    req_per_sec: fixed(r.requestsPerSec, 1),
    mean_ms: fixed(r.meanMs, 3),
    p50_ms: fixed(r.p50Ms, 3),
    p90_ms: fixed(r.p90Ms, 3),
    p99_ms: fixed(r.p99Ms, 3),
    errors: String(r.errors),
    error_kinds: errorKinds(r),
    batch_size: fixed(r.batchSize, 2),
    queue_ms: fixed(r.queueMs, 3),
    windows: String(r.windows),
    stable: String(r.stable),
  };
  if (streams) {
    const s = r.stream;
    Object.assign(row, {
      ttft_p50_ms: fixed(s?.ttftP50Ms ?? NaN, 3),
      ttft_p99_ms: fixed(s?.ttftP99Ms ?? NaN, 3),
      itl_p50_ms: fixed(s?.itlP50Ms ?? NaN, 3),
      itl_p99_ms: fixed(s?.itlP99Ms ?? NaN, 3),
      tpot_p50_ms: fixed(s?.tpotP50Ms ?? NaN, 3),
      tokens_per_sec: fixed(s?.tokensPerSec ?? NaN, 1),
    });
  }
  return row;
}

const hasStreams = (results: readonly LevelResult[]) => results.some((r) => r.stream !== undefined);

/** The results as CSV, a header line and one line per level. */
export function toCsv(results: readonly LevelResult[]): string {
  const streams = hasStreams(results);
  const columns = [...COLUMNS, ...(streams ? STREAM_COLUMNS : [])];
  const quote = (v: string) => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
  return [columns.join(","), ...results.map((r) => columns.map((c) => quote(cells(r, streams)[c]!)).join(","))].join("\n") + "\n";
}

/** The results as a table for the terminal; the server's columns only when it told them. */
export function toTable(results: readonly LevelResult[]): string {
  const streams = hasStreams(results);
  const server = results.some((r) => Number.isFinite(r.batchSize) || Number.isFinite(r.queueMs));
  const shown: [string, string][] = [
    ["mode", "mode"],
    ["level", "level"],
    ["req_per_sec", "req/s"],
    ["p50_ms", "p50 ms"],
    ["p90_ms", "p90 ms"],
    ["p99_ms", "p99 ms"],
    ...(streams ? ([["ttft_p50_ms", "TTFT p50"], ["ttft_p99_ms", "TTFT p99"], ["itl_p50_ms", "ITL p50"], ["itl_p99_ms", "ITL p99"], ["tpot_p50_ms", "TPOT p50"], ["tokens_per_sec", "tok/s"]] as [string, string][]) : []),
    ...(server ? ([["batch_size", "batch"], ["queue_ms", "queue ms"]] as [string, string][]) : []),
    ["windows", "windows"],
    ["errors", "errors"],
  ];
  const rows = results.map((r) => {
    const c = cells(r, streams);
    return shown.map(([key]) => (key === "errors" ? (r.errors === 0 ? "0" : `${r.errors} (${c.error_kinds})`) : key === "windows" ? `${c.windows}${r.stable ? "" : " (unstable)"}` : c[key]!));
  });
  const header = shown.map(([, title]) => title);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) => row.map((v, i) => (i < 2 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join("  ").trimEnd();
  const notes = server ? [] : ["", "(no batch sizes or queue times: the server's /metrics has no Shoal stage metrics)"];
  return [line(header), ...rows.map(line), ...notes].join("\n") + "\n";
}

/** Latency (p50 and p99) against throughput, one line per sweep. */
export function toPlot(results: readonly LevelResult[], title: string): string {
  const series: Series[] = [];
  for (const mode of ["concurrency", "rate"] as const) {
    const of = results.filter((r) => r.mode === mode);
    if (of.length === 0) continue;
    const name = mode === "concurrency" ? "closed loop" : "Poisson";
    series.push({ name: `p50, ${name}`, points: of.map((r) => [r.requestsPerSec, r.p50Ms]) }, { name: `p99, ${name}`, points: of.map((r) => [r.requestsPerSec, r.p99Ms]) });
  }
  return lineChart(series, { title, xLabel: "throughput (requests/s)", yLabel: "latency (ms)" });
}
