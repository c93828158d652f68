/**
 * A server's whole process tree, from /proc: peers such as Mosec and MLServer run their workers as
 * child processes, so neither their memory nor their shutdown is the main process's alone.
 */
import { readdirSync, readFileSync } from "node:fs";

// Parent pid of every process, read from /proc/<pid>/stat (field 4, after the command name).
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      out.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** Every process below `pid` (children, their children, ...), not `pid` itself. */
export function descendants(pid: number): number[] {
  const ppid = parents();
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    for (const [child, parent] of ppid) {
      if (parent === p) {
        out.push(child);
        queue.push(child);
      }
    }
  }
  return out;
}

/** SIGKILLs the processes that are still alive. */
export function killPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

export interface TreeMemory {
  /** Sum of VmRSS over the tree: counts pages shared between processes once per process. */
  rssBytes: number;
  /** Sum of Pss (proportional set size): shared pages divided among the processes sharing them. */
  pssBytes: number;
  processes: number;
}

function kbField(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** Resident memory of `pid` and all its descendants. */
export function treeMemory(pid: number): TreeMemory {
  let rssBytes = 0;
  let pssBytes = 0;
  let processes = 0;
  for (const p of [pid, ...descendants(pid)]) {
    try {
      rssBytes += kbField(readFileSync(`/proc/${p}/status`, "utf8"), "VmRSS");
      pssBytes += kbField(readFileSync(`/proc/${p}/smaps_rollup`, "utf8"), "Pss");
      processes++;
    } catch {
      // the process ended meanwhile
    }
  }
  return { rssBytes, pssBytes, processes };
}
