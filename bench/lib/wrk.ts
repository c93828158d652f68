/**
 * Running wrk and reading its `--latency` report.
 */
import { spawn, spawnSync } from "node:child_process";
import { pinned, shownCommand, type CpuSet } from "./machine.js";

/** Exits the process with install instructions when wrk is not on the PATH. */
export function requireWrk(): void {
  const probe = spawnSync("wrk", ["--version"], { encoding: "utf8" });
  if (probe.error !== undefined) {
    const code = (probe.error as NodeJS.ErrnoException).code;
    process.stderr.write(
      [
        code === "ENOENT" ? "bench: wrk is not installed (no `wrk` on the PATH)." : `bench: cannot run wrk: ${probe.error.message}`,
        "Install it, then run the benchmark again:",
        "  Debian/Ubuntu:  sudo apt-get update && sudo apt-get install -y wrk",
        "  Fedora:         sudo dnf install wrk",
        "  macOS:          brew install wrk",
        "(autocannon is not a substitute: it saturates before a Node server does.)",
        "",
      ].join("\n"),
    );
    process.exit(2);
  }
}

/** wrk's version line, e.g. "wrk debian/4.1.0-3+b2 [epoll]". */
export function wrkVersion(): string {
  const probe = spawnSync("wrk", ["--version"], { encoding: "utf8" });
  const text = `${probe.stdout ?? ""}${probe.stderr ?? ""}`;
  const line = text.split("\n").find((l) => l.startsWith("wrk")) ?? "unknown";
  return line.replace(/\s+Copyright.*$/, "").trim();
}

export interface WrkOptions {
  url: string;
  connections: number;
  /** wrk threads (default 1). */
  threads?: number;
  durationSec: number;
  /** Lua script path (for POST bodies). */
  script?: string;
  /** Extra environment, e.g. WRK_BODY for the post-json script. */
  env?: Record<string, string>;
  /** CPUs to pin wrk to with taskset; undefined runs it unpinned. */
  cpus?: CpuSet | undefined;
  /** Working directory of wrk (a relative `script` is found from there). */
  cwd?: string;
  /** Socket/request timeout passed to wrk (default 5s). */
  timeoutSec?: number;
}

/** What wrk reports. Latencies are in milliseconds. */
export interface WrkResult {
  requestsPerSec: number;
  requests: number;
  durationSec: number;
  latency: { avg: number; stdev: number; max: number; p50: number; p75: number; p90: number; p99: number };
  /** Responses with a status outside 2xx/3xx. */
  non2xx: number;
  socketErrors: { connect: number; read: number; write: number; timeout: number };
  transferPerSec: string;
  command: string;
  raw: string;
}

/** Runs wrk once and parses its report; rejects if wrk fails or prints something unreadable. */
export function runWrk(o: WrkOptions): Promise<WrkResult> {
  const args = [
    `-t${o.threads ?? 1}`,
    `-c${o.connections}`,
    `-d${o.durationSec}s`,
    `--timeout`,
    `${o.timeoutSec ?? 5}s`,
    "--latency",
    ...(o.script !== undefined ? ["-s", o.script] : []),
    o.url,
  ];
  const [file, argv] = pinned(o.cpus, "wrk", args);
  const command = shownCommand([file, ...argv], o.cwd);
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { cwd: o.cwd, env: { ...process.env, ...o.env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`${command} exited with ${code}: ${(err || out).trim()}`));
        return;
      }
      try {
        resolve({ ...parseWrk(out), command, raw: out });
      } catch (e) {
        reject(new Error(`${(e as Error).message}\n--- wrk output ---\n${out}${err}`));
      }
    });
  });
}

const TIME_UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "1.23ms" -> 1.23, "850.00us" -> 0.85, "1.02s" -> 1020 (milliseconds). */
export function parseTime(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m|h)$/.exec(text.trim());
  if (m === null) throw new Error(`cannot read wrk time '${text}'`);
  return Number(m[1]) * TIME_UNITS[m[2]!]!;
}

/** Parses wrk's text report (run with `--latency`). */
export function parseWrk(text: string): Omit<WrkResult, "command" | "raw"> {
  const need = (re: RegExp, what: string): RegExpExecArray => {
    const m = re.exec(text);
    if (m === null) throw new Error(`wrk output has no ${what}`);
    return m;
  };
  const stats = need(/^\s*Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+\s*$/m, "latency stats line");
  const pct = (p: string) => parseTime(need(new RegExp(`^\\s*${p}%\\s+(\\S+)\\s*$`, "m"), `${p}% latency`)[1]!);
  const totals = need(/^\s*(\d+) requests in ([\d.]+\w+),/m, "request total");
  const rps = need(/^Requests\/sec:\s+([\d.]+)/m, "Requests/sec");
  const transfer = /^Transfer\/sec:\s+(\S+)/m.exec(text);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(text);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  return {
    requestsPerSec: Number(rps[1]),
    requests: Number(totals[1]),
    durationSec: parseTime(totals[2]!) / 1000,
    latency: {
      avg: parseTime(stats[1]!),
      stdev: parseTime(stats[2]!),
      max: parseTime(stats[3]!),
      p50: pct("50"),
      p75: pct("75"),
      p90: pct("90"),
      p99: pct("99"),
    },
    non2xx: non2xx === null ? 0 : Number(non2xx[1]),
    socketErrors: sock === null ? { connect: 0, read: 0, write: 0, timeout: 0 } : { connect: Number(sock[1]), read: Number(sock[2]), write: Number(sock[3]), timeout: Number(sock[4]) },
    transferPerSec: transfer === null ? "" : transfer[1]!,
  };
}
