/**
 * The machine a benchmark runs on: CPUs, CPU pinning with taskset, and CPU time of processes.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { descendants } from "./proctree.js";

/** A list of CPU numbers to pin to. */
export type CpuSet = readonly number[];

/** The CPUs this process may run on (its affinity), from /proc; falls back to 0..n-1. */
export function allowedCpus(): number[] {
  try {
    const status = readFileSync("/proc/self/status", "utf8");
    const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(status);
    if (m !== null) return expandCpuList(m[1]!);
  } catch {
    // not Linux
  }
  return Array.from({ length: os.availableParallelism() }, (_, i) => i);
}

/** "0-2,5" -> [0, 1, 2, 5] */
export function expandCpuList(list: string): number[] {
  const out: number[] = [];
  for (const part of list.split(",")) {
    const [a, b] = part.split("-").map(Number);
    if (a === undefined || Number.isNaN(a)) continue;
    for (let i = a; i <= (b ?? a); i++) out.push(i);
  }
  return out;
}

let tasksetPresent: boolean | undefined;

/** True when `taskset` can be run. */
export function hasTaskset(): boolean {
  if (tasksetPresent === undefined) {
    const probe = spawnSync("taskset", ["-c", "0", "true"]);
    tasksetPresent = probe.error === undefined && probe.status === 0;
  }
  return tasksetPresent;
}

/** The command line that runs `file args` on `cpus` (unchanged when `cpus` is undefined). */
export function pinned(cpus: CpuSet | undefined, file: string, args: readonly string[]): [string, string[]] {
  if (cpus === undefined) return [file, [...args]];
  return ["taskset", ["-c", cpus.join(","), file, ...args]];
}

/**
 * A command line as the results show it: Node as `node`, and paths inside `cwd` (where it ran, the
 * repository) relative to it, so that the command works from any clone.
 */
export function shownCommand(words: readonly string[], cwd: string | undefined): string {
  return words.map((word) => shownPath(word === process.execPath ? "node" : word, cwd)).join(" ");
}

/** `text` with paths inside `cwd` made relative to it. */
export function shownPath(text: string, cwd: string | undefined): string {
  return cwd === undefined ? text : text.replaceAll(`${cwd}/`, "");
}

/** Describes a CPU set for humans: "core 0", "cores 0,1", "any core". */
export function describeCpus(cpus: CpuSet | undefined): string {
  if (cpus === undefined) return "any core";
  return cpus.length === 1 ? `core ${cpus[0]}` : `cores ${cpus.join(",")}`;
}

export interface MachineInfo {
  nproc: number;
  allowedCpus: number[];
  cpuModel: string;
  kernel: string;
  node: string;
  wrk: string;
  taskset: boolean;
  loadAvg: number[];
}

/** What the results should say about the machine. */
export function machineInfo(wrk: string): MachineInfo {
  const nproc = Number(spawnSync("nproc", { encoding: "utf8" }).stdout?.trim() || os.availableParallelism());
  let cpuModel = os.cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (m !== null) cpuModel = m[1]!.trim();
  } catch {
    // not Linux
  }
  return {
    nproc,
    allowedCpus: allowedCpus(),
    cpuModel,
    kernel: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    wrk,
    taskset: hasTaskset(),
    loadAvg: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

const TICKS_PER_SEC = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

// The kernel's run time of a task in nanoseconds, where it keeps it: /proc/<pid>/stat counts in
// clock ticks (10 ms), too coarse for a short point of a lightly loaded server.
const HAS_SCHEDSTAT = existsSync("/proc/self/schedstat");

// CPU seconds of one task (user + system), from its /proc/<pid>/task/<tid> folder.
function taskCpuSeconds(dir: string): number {
  if (HAS_SCHEDSTAT) return Number(readFileSync(`${dir}/schedstat`, "utf8").split(" ")[0]) / 1e9;
  const stat = readFileSync(`${dir}/stat`, "utf8");
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SEC;
}

/** CPU time (user + system, seconds) of each thread of a process, by thread id. Empty off Linux. */
export function threadCpuTimes(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  const dir = `/proc/${pid}/task`;
  if (!existsSync(dir)) return out;
  for (const tid of readdirSync(dir)) {
    try {
      out.set(Number(tid), taskCpuSeconds(`${dir}/${tid}`));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** CPU used by a process over an interval, in cores (1.0 = one core busy the whole time). */
export interface CpuUse {
  /** All threads. */
  total: number;
  /** The main thread (HTTP and event loop). */
  main: number;
  /** The busiest other thread (for Shoal, its worker thread or process). */
  busiestOther: number;
}

// Threads of `pid` and of its descendants: a server's worker processes are part of the server.
function treeCpuTimes(pid: number): Map<number, number> {
  const out = threadCpuTimes(pid);
  for (const child of descendants(pid)) for (const [tid, t] of threadCpuTimes(child)) out.set(tid, t);
  return out;
}

/** CPU time (user + system, seconds) used so far by `pid` and its child processes, all threads. */
export function treeCpuSeconds(pid: number): number {
  let total = 0;
  for (const t of treeCpuTimes(pid).values()) total += t;
  return total;
}

/** Measures CPU use of `pid` and its child processes between `start()` and `stop()`. */
export function cpuMeter(pid: number): { stop(): CpuUse } {
  const before = treeCpuTimes(pid);
  const t0 = performance.now();
  return {
    stop() {
      const after = treeCpuTimes(pid);
      const secs = (performance.now() - t0) / 1000;
      let total = 0;
      let main = 0;
      let busiestOther = 0;
      for (const [tid, t] of after) {
        const used = (t - (before.get(tid) ?? 0)) / secs;
        total += used;
        if (tid === pid) main = used;
        else busiestOther = Math.max(busiestOther, used);
      }
      const r = (x: number) => Math.round(x * 100) / 100;
      return { total: r(total), main: r(main), busiestOther: r(busiestOther) };
    },
  };
}

/** The commit measured, and whether src/ differs from it (uncommitted edits). */
export function gitState(root: string): { commit: string; srcDirty: boolean } {
  const head = spawnSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" });
  const status = spawnSync("git", ["status", "--porcelain", "--", "src"], { cwd: root, encoding: "utf8" });
  return { commit: head.status === 0 ? head.stdout.trim() : "unknown", srcDirty: (status.stdout ?? "").trim().length > 0 };
}

/** Jiffies per CPU line of /proc/stat ("cpu" is the sum of all): busy, idle (with iowait), steal. */
function procStat(): Map<string, { busy: number; idle: number; steal: number }> {
  const out = new Map<string, { busy: number; idle: number; steal: number }>();
  let text = "";
  try {
    text = readFileSync("/proc/stat", "utf8");
  } catch {
    return out;
  }
  for (const line of text.split("\n")) {
    if (!line.startsWith("cpu")) continue;
    const [name, ...f] = line.trim().split(/\s+/);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = f.map(Number) as number[];
    out.set(name!, { busy: user! + nice! + system! + irq! + softirq!, idle: idle! + iowait!, steal: steal ?? 0 });
  }
  return out;
}

// CPU time of this process's finished, reaped children (wrk runs are such children).
function reapedChildrenCpu(): number {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[13]) + Number(f[14])) / TICKS_PER_SEC;
  } catch {
    return NaN;
  }
}

/** Where the machine's CPU went during one measured point, in cores. */
export interface LoadReport {
  server: CpuUse;
  /** The load generator (counted once it has exited). */
  wrk: number;
  /** The whole machine, busy (not idle, not stolen). */
  machineBusy: number;
  /** Time the hypervisor gave to someone else. */
  steal: number;
  /** Busy share (0..1) of each CPU. */
  perCpu: Record<string, number>;
  /** Busy time not explained by the server, wrk or this harness: other processes on the machine. */
  foreign: number;
}

/** Starts measuring the CPU of the server, the load generator and everything else. Call stop() after wrk has exited. */
export function loadMeter(serverPid: number): { stop(): LoadReport } {
  const server = cpuMeter(serverPid);
  const s0 = procStat();
  const c0 = reapedChildrenCpu();
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  return {
    stop() {
      const serverUse = server.stop();
      const secs = (performance.now() - t0) / 1000;
      const s1 = procStat();
      const wrk = (reapedChildrenCpu() - c0) / secs;
      const self = process.cpuUsage(self0);
      const harness = (self.user + self.system) / 1e6 / secs;
      const r = (x: number) => Math.round(x * 100) / 100;
      const perCpu: Record<string, number> = {};
      let busy = NaN;
      let steal = NaN;
      for (const [name, b] of s1) {
        const a = s0.get(name);
        if (a === undefined) continue;
        const dBusy = (b.busy - a.busy) / TICKS_PER_SEC / secs;
        const dSteal = (b.steal - a.steal) / TICKS_PER_SEC / secs;
        if (name === "cpu") {
          busy = dBusy;
          steal = dSteal;
        } else perCpu[name] = r(dBusy);
      }
      return {
        server: serverUse,
        wrk: r(wrk),
        machineBusy: r(busy),
        steal: r(steal),
        perCpu,
        foreign: r(Math.max(0, busy - serverUse.total - wrk - harness)),
      };
    },
  };
}

/** Busy CPU seconds of the whole machine so far (all CPUs; not idle, not stolen); NaN off Linux. */
export function machineBusySeconds(): number {
  const all = procStat().get("cpu");
  return all === undefined ? NaN : all.busy / TICKS_PER_SEC;
}

/** Busy cores of the whole machine over `ms`, apart from this process. */
export async function machineBusy(ms: number): Promise<number> {
  const s0 = machineBusySeconds();
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const s1 = machineBusySeconds();
  const secs = (performance.now() - t0) / 1000;
  if (Number.isNaN(s0) || Number.isNaN(s1)) return 0;
  const self = process.cpuUsage(self0);
  return Math.max(0, (s1 - s0) / secs - (self.user + self.system) / 1e6 / secs);
}

/**
 * Waits until the machine is quiet (under `threshold` busy cores over a 1 s window) or `maxWaitSec`
 * has passed. Returns the seconds waited and the last load seen.
 */
export async function waitQuiet(threshold: number, maxWaitSec: number): Promise<{ waitedSec: number; busy: number }> {
  const t0 = performance.now();
  let busy = await machineBusy(500);
  while (busy > threshold && (performance.now() - t0) / 1000 < maxWaitSec) busy = await machineBusy(1000);
  return { waitedSec: Math.round((performance.now() - t0) / 100) / 10, busy: Math.round(busy * 100) / 100 };
}
