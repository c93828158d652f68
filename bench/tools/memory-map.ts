/**
 * Where a running process's memory is: its mappings from /proc/<pid>/smaps grouped by what they
 * hold (RSS and PSS, MiB), and, when it was started with bench/tools/heap-spaces.mjs preloaded,
 * the V8 heap of each of its threads.
 *
 *   node --import ./bench/tools/heap-spaces.mjs dist/cli/main.js serve ... &   # the server
 *   node --import tsx bench/tools/memory-map.ts <pid>
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { positionals, values } = parseArgs({ options: { "heap-dir": { type: "string", default: process.env.HEAP_SPACES_DIR ?? "/tmp/heap-spaces" } }, allowPositionals: true });
const pid = Number(positionals[0]);
if (!Number.isInteger(pid) || pid <= 0) throw new Error("usage: memory-map.ts <pid> [--heap-dir <dir>]");

// What a mapping holds, from its path: anonymous memory is V8's heaps, malloc's arenas and stacks.
function kind(path: string): string {
  if (path === "") return "anonymous (V8 heaps, malloc arenas, thread stacks)";
  if (path === "[heap]") return "[heap] (malloc's main arena)";
  if (path.includes("libonnxruntime")) return "libonnxruntime.so";
  if (/\/(node|bun)$/.test(path)) return "runtime binary";
  if (path.startsWith("[")) return "other (stack, vdso, ...)";
  return "other files (libraries, add-ons)";
}

const groups = new Map<string, { rss: number; pss: number }>();
let current = "";
for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
  const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
  if (mapping !== null) {
    current = kind(mapping[1]!);
    continue;
  }
  const field = /^(Rss|Pss):\s+(\d+) kB/.exec(line);
  if (field === null) continue;
  const g = groups.get(current) ?? { rss: 0, pss: 0 };
  g[field[1] === "Rss" ? "rss" : "pss"] += Number(field[2]) * 1024;
  groups.set(current, g);
}
const MiB = (b: number) => (b / 2 ** 20).toFixed(1).padStart(7);
const total = [...groups.values()].reduce((t, g) => ({ rss: t.rss + g.rss, pss: t.pss + g.pss }), { rss: 0, pss: 0 });
process.stdout.write(`    RSS     PSS  (MiB)  process ${pid}, ${readdirSync(`/proc/${pid}/task`).length} threads\n`);
for (const [name, g] of [...groups].sort((a, b) => b[1].rss - a[1].rss)) process.stdout.write(`${MiB(g.rss)} ${MiB(g.pss)}  ${name}\n`);
process.stdout.write(`${MiB(total.rss)} ${MiB(total.pss)}  total\n`);

const dir = values["heap-dir"]!;
const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith(`${pid}-`)) : [];
if (files.length > 0) {
  process.stdout.write("\nV8 heap per thread (physical MiB; part of the anonymous memory above):\n");
  for (const f of files.sort()) {
    const h = JSON.parse(readFileSync(`${dir}/${f}`, "utf8")) as { thread: string; physical: number; used: number; spaces: Record<string, number> };
    const spaces = Object.entries(h.spaces).filter(([, b]) => b >= 2 ** 20 / 10).map(([s, b]) => `${s} ${MiB(b).trim()}`);
    process.stdout.write(`${MiB(h.physical)}  ${h.thread.padEnd(10)} (used ${MiB(h.used).trim()}: ${spaces.join(", ")})\n`);
  }
}
