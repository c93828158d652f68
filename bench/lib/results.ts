/**
 * Writing results: every measured point as JSON, and a Markdown summary beside it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Writes `<dir>/<name>.json` and `<dir>/<name>.md`; returns their paths. */
export function writeResults(dir: string, name: string, data: unknown, markdown: string): { json: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, `${name}.json`);
  const md = join(dir, `${name}.md`);
  writeFileSync(json, JSON.stringify(data, null, 2) + "\n");
  writeFileSync(md, markdown.endsWith("\n") ? markdown : markdown + "\n");
  return { json, md };
}

/** A GitHub-flavoured Markdown table. */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[], align?: readonly ("l" | "r")[]): string {
  const sep = headers.map((_, i) => ((align?.[i] ?? "l") === "r" ? "---:" : "---"));
  return [headers, sep, ...rows].map((r) => `| ${r.join(" | ")} |`).join("\n");
}

/** A fixed-width text table for the terminal. */
export function textTable(headers: readonly string[], rows: readonly (readonly string[])[], align?: readonly ("l" | "r")[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: readonly string[]) =>
    r.map((cell, i) => ((align?.[i] ?? "l") === "r" ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join("  ").trimEnd();
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** 12345.6 -> "12,346" */
export function fmtInt(x: number): string {
  return Number.isFinite(x) ? Math.round(x).toLocaleString("en-US") : "n/a";
}

/** Milliseconds with sensible precision: 0.087 -> "0.087", 5.54 -> "5.54". */
export function fmtMs(x: number): string {
  if (!Number.isFinite(x)) return "n/a";
  return Math.abs(x) < 1 ? x.toFixed(3) : x.toFixed(2);
}

/** 12345 -> "12.3k" */
export function fmtK(x: number): string {
  return Number.isFinite(x) ? `${(x / 1000).toFixed(1)}k` : "n/a";
}

/** The closing sections of a scenario's Markdown report: its targets, then the exact commands. */
export function targetsAndCommands(verdicts: readonly string[], commands: Record<string, readonly string[]>): string[] {
  return [
    "## Targets",
    "",
    ...verdicts.map((v) => `- ${v}`),
    "",
    "## Commands",
    "",
    "```",
    ...Object.entries(commands).flatMap(([k, v]) => [`# ${k}`, ...v]),
    "```",
    "",
  ];
}
