/**
 * Starting a server under test as a subprocess and waiting until it answers.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { pinned, shownCommand, type CpuSet } from "./machine.js";
import { descendants, killPids } from "./proctree.js";
import type { RuntimeName } from "./runtimes.js";

export interface ServerSpec {
  /** Short name used in results, e.g. "shoal". */
  name: string;
  /**
   * Script run with `node` (path relative to `cwd`), with `--import tsx` when it is TypeScript: a
   * compiled server such as `dist/cli/main.js` runs as `npx shoal` runs it, without tsx's hooks
   * (which cost the process and each of its worker threads memory and start-up time).
   */
  script: string;
  /** Another program to run instead of node (Bun, a Python peer): the script is then its first argument. */
  program?: string;
  /** What the server runs on, for the results (default node). */
  runtime?: RuntimeName;
  /** Arguments after the script; `{port}` is replaced by the port. */
  args: string[];
  port: number;
  cwd: string;
  env?: Record<string, string>;
  cpus?: CpuSet | undefined;
  /** Ready when a POST of `body` (as `contentType`, default JSON) to `path` answers with this status (default 200). */
  probe: { path: string; body: string | Uint8Array; contentType?: string; status?: number; check?: (text: string) => string | undefined };
  /** How long to wait for the first good answer (default 20 s). */
  startTimeoutMs?: number;
}

export interface RunningServer {
  name: string;
  pid: number;
  port: number;
  url: string;
  command: string;
  /** The last lines the server printed (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

// Never leave a server behind: kill the ones still running when the harness exits.
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  const killAll = () => {
    for (const child of running) child.kill("SIGKILL");
  };
  process.on("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      killAll();
      process.exit(130);
    });
  }
}

/** A TCP port that was free a moment ago on `host`. */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Starts the server and resolves once its probe request succeeds; rejects with its output otherwise. */
/** A server's environment with `{port}` replaced by its port and each `{free}` by another free port (a peer's gRPC or metrics port). */
export async function portEnv(env: Record<string, string>, port: number): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) out[k] = v.replaceAll("{port}", String(port)).replace("{free}", String(await freePort()));
  return out;
}

export async function startServer(spec: ServerSpec): Promise<RunningServer> {
  installExitHook();
  const scriptArgs = [spec.script, ...spec.args.map((a) => a.replaceAll("{port}", String(spec.port)))];
  const [file, argv] = pinned(spec.cpus, spec.program ?? process.execPath, spec.program !== undefined ? scriptArgs : /\.[cm]?ts$/.test(spec.script) ? ["--import", "tsx", ...scriptArgs] : scriptArgs);
  const command = shownCommand([file, ...argv], spec.cwd);
  const child = spawn(file, argv, { cwd: spec.cwd, env: { ...process.env, ...spec.env }, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split("\n").filter((l) => l.length > 0));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  let exited: string | undefined;
  const gone = new Promise<void>((resolve) => {
    child.on("exit", (code, signal) => {
      exited = signal !== null ? `killed by ${signal}` : `exited with code ${code}`;
      running.delete(child);
      resolve();
    });
  });
  const url = `http://127.0.0.1:${spec.port}`;
  const server: RunningServer = {
    name: spec.name,
    pid: child.pid!,
    port: spec.port,
    url,
    command,
    output: () => lines.join("\n"),
    async stop() {
      if (exited !== undefined) return;
      // Peers run worker processes of their own; make sure none outlives its server.
      const tree = descendants(child.pid!);
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await gone;
      clearTimeout(timer);
      killPids(tree);
    },
  };
  const deadline = Date.now() + (spec.startTimeoutMs ?? 20_000);
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (exited !== undefined) throw new Error(`${spec.name} (${command}) ${exited} before answering:\n${server.output()}`);
    try {
      const res = await fetch(url + spec.probe.path, {
        method: "POST",
        headers: { "content-type": spec.probe.contentType ?? "application/json" },
        body: spec.probe.body,
        signal: AbortSignal.timeout(1000),
      });
      const text = await res.text();
      if (res.status === (spec.probe.status ?? 200)) {
        const wrong = spec.probe.check?.(text);
        if (wrong === undefined) return server;
        await server.stop();
        throw new Error(`${spec.name} answered the probe wrongly: ${wrong}`);
      }
      last = `status ${res.status}: ${text}`;
    } catch (err) {
      if ((err as Error).message.includes("answered the probe wrongly")) throw err;
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await server.stop();
  throw new Error(`${spec.name} (${command}) did not answer within ${spec.startTimeoutMs ?? 20_000} ms (${last}):\n${server.output()}`);
}
