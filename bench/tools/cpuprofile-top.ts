/**
 * Summarises V8 .cpuprofile files (from `node --cpu-prof`): where the time went, by function
 * (self time), by file group, and inclusive time of the heaviest functions.
 *
 *   node --import tsx bench/tools/cpuprofile-top.ts [--top 30] [--match text] [--skip s] [--span s] FILE.cpuprofile...
 *
 * --skip drops the first seconds of each profile (start-up, module loading) and --span keeps only
 * that many seconds after it, so that the summary covers the load test alone.
 * Each file is one thread (main thread, worker threads, loader threads).
 */
import { readFileSync } from "node:fs";

process.stdout.on("error", () => process.exit(0)); // e.g. piped into head
import { basename } from "node:path";
import { parseArgs } from "node:util";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    top: { type: "string", default: "25" },
    match: { type: "string" },
    skip: { type: "string", default: "0" },
    span: { type: "string" },
  },
});
const top = Number(values.top);

/** Where a frame's code lives: shoal (dist/ = src/), node internals, a dependency, V8 pseudo-frames. */
function group(f: CallFrame): string {
  if (f.url === "") return f.functionName.startsWith("(") ? f.functionName : "(native)";
  if (f.url.includes("/node_modules/")) return `dep:${f.url.split("/node_modules/")[1]!.split("/")[0]}`;
  if (f.url.includes("/dist/")) return `shoal:${f.url.split("/dist/")[1]!.replace(/\.js$/, ".ts")}`;
  if (f.url.startsWith("node:")) return f.url.replace(/^node:internal\//, "node:").split("/").slice(0, 2).join("/");
  return basename(f.url);
}

function label(f: CallFrame): string {
  const name = f.functionName || "(anonymous)";
  if (f.url === "") return name;
  const file = f.url.includes("/dist/") ? `src/${f.url.split("/dist/")[1]!.replace(/\.js$/, ".ts")}` : f.url.replace(/^file:\/\/.*\/node_modules\//, "").replace(/^node:internal\//, "node:");
  return `${name}  ${file}:${f.lineNumber + 1}`;
}

const pct = (x: number, total: number) => `${((100 * x) / total).toFixed(1).padStart(5)}%`;
const ms = (us: number) => `${(us / 1000).toFixed(0).padStart(7)} ms`;

for (const file of positionals) {
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  const from = p.startTime + Number(values.skip) * 1e6;
  const to = values.span === undefined ? Infinity : from + Number(values.span) * 1e6;
  let now = p.startTime;
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    now += dt;
    if (now < from || now > to) continue;
    total += dt;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
  }
  const idle = [...self].filter(([id]) => byId.get(id)!.callFrame.functionName === "(idle)").reduce((a, [, t]) => a + t, 0);
  const busy = total - idle;

  const selfByFn = new Map<string, number>();
  const selfByGroup = new Map<string, number>();
  const inclByFn = new Map<string, number>();
  for (const [id, t] of self) {
    const f = byId.get(id)!.callFrame;
    if (f.functionName === "(idle)") continue;
    selfByFn.set(label(f), (selfByFn.get(label(f)) ?? 0) + t);
    selfByGroup.set(group(f), (selfByGroup.get(group(f)) ?? 0) + t);
    // Inclusive: credit every distinct function on the stack once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const l = label(byId.get(at)!.callFrame);
      if (seen.has(l)) continue;
      seen.add(l);
      inclByFn.set(l, (inclByFn.get(l) ?? 0) + t);
    }
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  console.log(`\n=== ${basename(file)}: ${(total / 1e6).toFixed(1)} s of ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s profiled, busy ${(busy / 1e6).toFixed(2)} s (${pct(busy, total).trim()}), idle ${(idle / 1e6).toFixed(2)} s`);
  console.log(`\n-- self time by code group (share of busy time)`);
  for (const [g, t] of sorted(selfByGroup).slice(0, Math.max(20, top))) console.log(`${ms(t)} ${pct(t, busy)}  ${g}`);
  console.log(`\n-- top ${top} functions by self time`);
  for (const [f, t] of sorted(selfByFn).slice(0, top)) console.log(`${ms(t)} ${pct(t, busy)}  ${f}`);
  console.log(`\n-- top ${top} functions by inclusive time${values.match ? ` matching '${values.match}'` : ""}`);
  const incl = sorted(inclByFn).filter(([f]) => !f.startsWith("(root)") && (values.match === undefined || f.includes(values.match)));
  for (const [f, t] of incl.slice(0, top)) console.log(`${ms(t)} ${pct(t, busy)}  ${f}`);
}
