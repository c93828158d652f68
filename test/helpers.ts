/**
 * Shared test code: start a real server in a subprocess, read its log, talk HTTP to it.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { request as httpRequest, type ClientRequest, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureModel } from "../scripts/models/ensure-model.js";

/** The repository root: servers run from here so that `import "shoal"` resolves to ./dist. */
export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The path of a fixture server in test/fixtures. */
export function fixture(name: string): string {
  return join(ROOT, "test", "fixtures", name);
}

/**
 * The runtime that servers under test run on: `SHOAL_TEST_RUNTIME=bun` runs them with the `bun`
 * found in PATH, anything else (or nothing) with this Node and tsx. The tests themselves always
 * run on Node's test runner.
 */
export const RUNTIME: "node" | "bun" = process.env.SHOAL_TEST_RUNTIME === "bun" ? "bun" : "node";

/**
 * Why a test of node:http's own handling of connections and malformed or late requests is
 * skipped on Bun, whose Bun.serve does all of that itself (README: "On Bun"); undefined on Node.
 */
/**
 * Set when the suite runs again on another runtime (`SHOAL_TEST_REPEAT=1`, as CI's second and
 * third runs do): the tests that do not depend on the runtime under test (the benchmark harness,
 * the container image) ran in the first run and skip, saying so.
 */
export const RAN_ONCE = process.env.SHOAL_TEST_REPEAT === "1" ? "independent of the runtime under test: it ran in the suite's first run (SHOAL_TEST_REPEAT=1)" : undefined;

export const NODE_HTTP_ONLY = RUNTIME === "bun" ? "node:http's own handling; Bun.serve parses requests and keeps connections itself (README: On Bun)" : undefined;

/** The command and arguments that run a server script (TypeScript or JavaScript) on {@link RUNTIME}. */
export function runtimeCommand(script: string, args: readonly string[] = []): [string, string[]] {
  if (RUNTIME === "bun") return ["bun", [script, ...args]];
  return [process.execPath, script.endsWith(".ts") ? ["--import", "tsx", script, ...args] : [script, ...args]];
}

/**
 * Starts a server with a command of its own (not a script on {@link RUNTIME}), with `env` over this
 * process's environment, and resolves once it logs "ready", with its port and its output so far;
 * rejects with that output if it does not.
 */
export async function startCommand(command: string, args: string[], cwd: string, readyMs: number, env?: Record<string, string>): Promise<{ proc: ChildProcess; port: number; output: () => string }> {
  const proc = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"], env: env === undefined ? undefined : { ...process.env, ...env } });
  let out = "";
  proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  try {
    await waitFor("ready", () => (out.includes('"msg":"ready"') ? true : undefined), readyMs);
  } catch (err) {
    proc.kill("SIGTERM");
    throw new Error(`${(err as Error).message}\n${out}`);
  }
  return { proc, port: Number(out.match(/"port":(\d+)/)![1]), output: () => out };
}

/** One JSON log line of the server. */
export type LogLine = Record<string, unknown> & { msg?: string };

export interface StartOptions {
  /** Extra arguments after `--port 0 --address 127.0.0.1`. */
  args?: string[];
  /** Extra environment for the server process. */
  env?: Record<string, string>;
  /** Wait for the "ready" line before resolving (default true). */
  waitReady?: boolean;
  /** Give up on start-up after this long (default 30 s). */
  startTimeoutMs?: number;
}

// The environment of a server under test: ours without SHOAL_* settings, so that the tests do not
// depend on the shell they run in, and without the test runner's own markers. No gRPC port unless
// a test asks for one: servers run in parallel, and the default 8001 would be taken by the first.
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith("SHOAL_") || key.startsWith("NODE_TEST")) continue;
    env[key] = value;
  }
  return { ...env, SHOAL_GRPC_PORT: "0", ...extra };
}

/** A server process under test. */
export class ServerProcess {
  readonly proc: ChildProcess;
  port = 0;
  #stdout = "";
  #stderr = "";
  #exit: Promise<number | null>;
  #exited = false;

  constructor(script: string, args: string[], env: Record<string, string> = {}) {
    const [command, argv] = runtimeCommand(script, args);
    this.proc = spawn(command, argv, {
      cwd: ROOT,
      env: cleanEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => (this.#stdout += chunk));
    this.proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => (this.#stderr += chunk));
    this.#exit = new Promise((resolve) => {
      this.proc.on("exit", (code) => {
        this.#exited = true;
        resolve(code);
      });
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  get exited(): boolean {
    return this.#exited;
  }

  /** The JSON log lines written so far (other lines are skipped). */
  logs(): LogLine[] {
    const lines: LogLine[] = [];
    for (const line of this.#stdout.split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        // A line still being written.
      }
    }
    return lines;
  }

  /** Resolves with the first log line that matches, failing if the server exits or time runs out. */
  async waitForLog(match: (line: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const found = this.logs().find(match);
      if (found !== undefined) return found;
      if (this.#exited) throw new Error(`the server exited before logging the line awaited\n${this.describe()}`);
      if (Date.now() > end) throw new Error(`no such log line within ${timeoutMs} ms\n${this.describe()}`);
      await sleep(20);
    }
  }

  /** Resolves with the exit code once the process has ended. */
  exitCode(): Promise<number | null> {
    return this.#exit;
  }

  /** Stops the server with SIGTERM (SIGKILL after 10 s) and resolves with its exit code. */
  async stop(): Promise<number | null> {
    if (!this.#exited) {
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await this.#exit;
      clearTimeout(timer);
    }
    return this.#exit;
  }

  /** The output so far, for failure messages. */
  describe(): string {
    return `--- stdout\n${this.#stdout.slice(-4000)}\n--- stderr\n${this.#stderr.slice(-4000)}`;
  }
}

/**
 * Starts `script` with `--port 0 --address 127.0.0.1` and resolves once it listens (and, unless
 * told otherwise, once its workers are ready).
 */
export async function startServer(script: string, options: StartOptions = {}): Promise<ServerProcess> {
  const server = new ServerProcess(script, ["--port", "0", "--address", "127.0.0.1", ...(options.args ?? [])], options.env);
  const timeout = options.startTimeoutMs ?? 30_000;
  try {
    const listening = await server.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("listening on http://"), timeout);
    assert.equal(typeof listening.port, "number", "the listening line has a numeric port");
    server.port = listening.port as number;
    if (options.waitReady ?? true) await server.waitForLog((l) => l.msg === "ready", timeout);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/** What a process that was expected to exit did. */
export interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `script` with `args` and resolves once it exits (killing it after `timeoutMs`). */
export async function runToExit(script: string, args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<Exited> {
  const server = new ServerProcess(script, args, env);
  const timer = setTimeout(() => server.proc.kill("SIGKILL"), timeoutMs);
  const code = await server.exitCode();
  clearTimeout(timer);
  return { code, stdout: server.stdout, stderr: server.stderr };
}

/** A response, read whole. */
export interface Reply {
  status: number;
  headers: Headers;
  body: Uint8Array;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any;
  /** Time from sending to the whole body read, in ms. */
  elapsedMs: number;
}

/** POSTs `body` (a value is sent as JSON) and reads the whole answer. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const raw = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
  return send(url, { method: "POST", body: raw, headers: { "content-type": "application/json", ...headers } });
}

/** Sends any request with fetch and reads the whole answer. */
export async function send(url: string, init: RequestInit = {}): Promise<Reply> {
  const start = performance.now();
  const res = await fetch(url, init);
  const body = new Uint8Array(await res.arrayBuffer());
  const elapsedMs = performance.now() - start;
  const text = Buffer.from(body).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, body, text, json, elapsedMs };
}

/**
 * Asserts an error answer: the status, a JSON body that is exactly `{"error": "..."}` whose text
 * equals `error` (or matches it), the JSON content-type and a request id.
 */
export function assertError(reply: Reply, status: number, error: string | RegExp): void {
  const context = `${reply.status} ${reply.text}`;
  assert.equal(reply.status, status, context);
  assert.equal(reply.headers.get("content-type"), "application/json", context);
  assert.ok(reply.headers.get("x-request-id"), `no x-request-id on ${context}`);
  assert.deepEqual(Object.keys(reply.json ?? {}), ["error"], context);
  assert.equal(typeof reply.json.error, "string", context);
  if (typeof error === "string") assert.equal(reply.json.error, error, context);
  else assert.match(reply.json.error, error, context);
}

/** A raw request over its own connection, for tests that need to hang up or stream. */
export interface RawRequest {
  req: ClientRequest;
  /** Settles with the answer; rejects if the connection fails before one arrives. */
  response: Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>;
}

/** Opens a request on its own connection (no agent), optionally sending `body` and ending it. */
export function rawRequest(port: number, path: string, options: { method?: string; headers?: Record<string, string | number>; body?: string | Buffer; end?: boolean } = {}): RawRequest {
  const req = httpRequest({ host: "127.0.0.1", port, path, method: options.method ?? "POST", headers: options.headers, agent: false });
  const response = new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
  // A caller that hangs up on purpose does not await the response.
  response.catch(() => {});
  if (options.body !== undefined) req.write(options.body);
  if (options.end ?? true) req.end();
  return { req, response };
}

/** Whether process `pid` is still running (signal 0 checks without signalling). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits until `check` returns (or resolves to) a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The value of one sample of the exposition text, or undefined when absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

/** The value of one sample of the server's `/metrics` now, or undefined when the series is absent. */
export async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  return sample((await send(`${url}/metrics`)).text, name, labels);
}

/** Reads one sample of a scrape: `read(name, labels)`. */
export type MetricReader = (name: string, labels?: Record<string, string>) => number | undefined;

/**
 * Waits until `ok` holds of one scrape of the server's `/metrics`: what tests wait on when
 * requests must have reached a given point (accepted, queued, computed) before the next step.
 */
export async function waitForMetrics(url: string, what: string, ok: (read: MetricReader) => boolean, timeoutMs = 10_000): Promise<void> {
  await waitFor(what, async () => {
    const text = (await send(`${url}/metrics`)).text;
    return ok((name, labels) => sample(text, name, labels)) ? true : undefined;
  }, timeoutMs);
}

/** Waits until one sample of the server's `/metrics` satisfies `ok`. */
export function waitForMetric(url: string, name: string, labels: Record<string, string>, ok: (value: number) => boolean, timeoutMs = 10_000): Promise<void> {
  return waitForMetrics(url, `${name}${JSON.stringify(labels)} to satisfy ${ok.toString()}`, (read) => {
    const value = read(name, labels);
    return value !== undefined && ok(value);
  }, timeoutMs);
}

/**
 * A file that fixture workers append lines to (its path goes to them in `RECORD_FILE`), so
 * that tests can see which items reached `forward()`.
 */
export class RecordFile {
  readonly dir = mkdtempSync(join(tmpdir(), "shoal-test-"));
  readonly path = join(this.dir, "record.log");

  /** The lines written so far. */
  lines(): string[] {
    try {
      return readFileSync(this.path, "utf8").split("\n").filter((l) => l.length > 0);
    } catch {
      return [];
    }
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Why the fetched model `name` (scripts/models/catalog.ts) cannot be had here, or undefined when
 * it is made (or was already): a reason to skip its tests. With SHOAL_REQUIRE_MODELS set (CI
 * sets it), it throws instead, so that those tests fail rather than skip.
 */
export async function modelUnavailable(name: string): Promise<string | undefined> {
  try {
    await ensureModel(name);
    return undefined;
  } catch (err) {
    if (process.env.SHOAL_REQUIRE_MODELS) throw err;
    return `the ${name} model cannot be made here (set SHOAL_REQUIRE_MODELS to fail instead): ${(err as Error).message.split("\n")[0]}`;
  }
}

/** The pids of a process's children, from /proc (the worker processes of a server). */
export function childPids(pid: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * A zstd frame written by hand (RFC 8878), so that every runtime's decoder is tested on the same
 * bytes, Node.js 20's included, which has no zstd encoder: `raw` as raw blocks, then `rle`
 * blocks of 128 KiB of one byte each (a bomb: 4 bytes a block).
 */
export function zstdFrame(raw: Buffer, rle = 0): Buffer {
  const BLOCK = 128 * 1024;
  // Magic number; a descriptor with no content size, checksum or dictionary; a 128 KiB window.
  const parts: Buffer[] = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3])];
  const header = (last: boolean, type: number, size: number) => {
    const h = (size << 3) | (type << 1) | (last ? 1 : 0);
    return Buffer.from([h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff]);
  };
  // Raw blocks of a window's size at most (at least one, maybe empty).
  for (let at = 0; at === 0 || at < raw.byteLength; at += BLOCK) {
    const part = raw.subarray(at, at + BLOCK);
    parts.push(header(rle === 0 && at + BLOCK >= raw.byteLength, 0, part.byteLength), part);
  }
  for (let i = 0; i < rle; i++) parts.push(header(i === rle - 1, 1, BLOCK), Buffer.from([0x20]));
  return Buffer.concat(parts);
}
