/**
 * Which of Shoal's files a request runs through, on the coordinator and in the workers, measured
 * with V8's coverage: each path's server is run twice under NODE_V8_COVERAGE, answering no
 * request and then N requests one after the other, and a file is on the path when one of its
 * functions ran at least N times more (once per request: each request is a batch of its own).
 * These are the counts of docs/architecture.md ("The request paths").
 *
 *   npm run build && node --import tsx bench/tools/path-files.ts [route|v2|grpc ...] [--requests 200]
 *
 * test/request-paths.test.ts holds docs/architecture.md's counts to what this measures.
 */
import { spawn } from "node:child_process";
import { argv } from "node:process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { V2Client, fp32 } from "../../test/grpc-helpers.js";
import { ModelRepo } from "../../test/model-helpers.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface Path {
  command: string[];
  /** Sends one request; resolves once it is answered (and throws unless it succeeded). */
  request: (http: number, grpc: number) => Promise<void>;
}

async function post(url: string, body: string): Promise<void> {
  const reply = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json" } });
  await reply.arrayBuffer();
  if (reply.status !== 200) throw new Error(`${url}: ${reply.status}`);
}

let client: V2Client | undefined;
const serveRepository = (dir: string) => ["dist/cli/main.js", "serve", "--model-repository", dir];
const PATHS: Record<string, (repository: string) => Path> = {
  route: () => ({
    command: ["--import", "tsx", "test/fixtures/pipeline.ts"],
    request: (http) => post(`http://127.0.0.1:${http}/embed`, JSON.stringify({ n: 4 })),
  }),
  v2: (repository) => ({
    command: serveRepository(repository),
    request: (http) => post(`http://127.0.0.1:${http}/v2/models/echo/infer`, JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [1, 2] }] })),
  }),
  grpc: (repository) => ({
    command: serveRepository(repository),
    request: async (_http, grpc) => {
      client ??= new V2Client(grpc);
      await client.call("ModelInfer", { model_name: "echo", inputs: [{ name: "x", datatype: "FP32", shape: [2] }], raw_input_contents: [fp32([1, 2])] });
    },
  }),
};

/** The path names: a two-stage route, a V2 REST infer, a gRPC ModelInfer. */
export const PATH_KINDS = Object.keys(PATHS);

/** Runs the path's server under coverage, sends `n` requests once it is ready, and stops it. */
async function covered(path: Path, n: number, dir: string): Promise<void> {
  const [httpPort, grpcPort] = [43300 + Math.floor(Math.random() * 500), 43900 + Math.floor(Math.random() * 500)];
  const proc = spawn(process.execPath, [...path.command, "--port", String(httpPort), "--grpc-port", String(grpcPort), "--address", "127.0.0.1", "--log-level", "info", "--log-format", "json"], {
    cwd: ROOT,
    env: { ...process.env, NODE_V8_COVERAGE: dir },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  await new Promise<void>((resolve, reject) => {
    proc.stdout!.on("data", (chunk: Buffer) => {
      out += chunk;
      if (out.includes('"msg":"ready"')) resolve();
    });
    proc.once("exit", (code) => reject(new Error(`the server exited (${code}) before it was ready:\n${out}`)));
  });
  proc.stdout!.resume();
  for (let i = 0; i < n; i++) await path.request(httpPort, grpcPort);
  client?.close();
  client = undefined;
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  proc.kill("SIGTERM");
  await exited;
}

/** Per thread ("coordinator" for the main thread, "worker" for the others) and file: the call counts of its functions. */
function counts(dir: string): Map<string, Map<string, number[]>> {
  const sides = new Map<string, Map<string, number[]>>([["coordinator", new Map()], ["worker", new Map()]]);
  for (const file of readdirSync(dir)) {
    // coverage-<pid>-<time>-<thread id>.json: thread 0 is the main thread.
    const side = /-0\.json$/.test(file) ? "coordinator" : "worker";
    const { result } = JSON.parse(readFileSync(join(dir, file), "utf8")) as { result: { url: string; functions: { ranges: { count: number }[] }[] }[] };
    for (const script of result) {
      if (!script.url.startsWith(`file://${ROOT}dist/`)) continue;
      const name = relative(join(ROOT, "dist"), fileURLToPath(script.url)).replace(/\.js$/, ".ts");
      const calls = script.functions.map((f) => f.ranges[0]!.count);
      const files = sides.get(side)!;
      const sum = files.get(name);
      files.set(name, sum === undefined ? calls : sum.map((c, i) => c + (calls[i] ?? 0)));
    }
  }
  return sides;
}

/** The files of one path, by side ("coordinator", "worker"), each list sorted; `all` counts a file of both sides once. */
export interface PathFiles {
  coordinator: string[];
  worker: string[];
  all: number;
}

/** Measures the files `kind`'s request runs through, from `requests` requests against none. */
export async function pathFiles(kind: string, requests = 200): Promise<PathFiles> {
  const make = PATHS[kind];
  if (make === undefined) throw new Error(`no path '${kind}': ${PATH_KINDS.join(", ")}`);
  const base = mkdtempSync(join(tmpdir(), "shoal-path-"));
  const repository = new ModelRepo();
  try {
    repository.module("echo", "echo.ts");
    const path = make(repository.dir);
    await covered(path, 0, join(base, "idle"));
    await covered(path, requests, join(base, "busy"));
    const [idle, busy] = [counts(join(base, "idle")), counts(join(base, "busy"))];
    const side = (name: string) => {
      const found: string[] = [];
      for (const [file, calls] of busy.get(name)!) {
        const before = idle.get(name)!.get(file) ?? [];
        if (calls.some((c, i) => c - (before[i] ?? 0) >= requests)) found.push(file);
      }
      return found.sort();
    };
    const [coordinator, worker] = [side("coordinator"), side("worker")];
    return { coordinator, worker, all: new Set([...coordinator, ...worker]).size };
  } finally {
    rmSync(base, { recursive: true, force: true });
    repository.remove();
  }
}

if (argv[1] !== undefined && fileURLToPath(import.meta.url) === argv[1]) {
  const args = argv.slice(2);
  const at = args.indexOf("--requests");
  const requests = at >= 0 ? Number(args.splice(at, 2)[1]) : 200;
  for (const kind of args.length > 0 ? args : PATH_KINDS) {
    const files = await pathFiles(kind, requests);
    console.log(`${kind}: ${files.coordinator.length} files on the coordinator, ${files.worker.length} in the workers, ${files.all} in all`);
    console.log(`  coordinator: ${files.coordinator.join(" ")}`);
    console.log(`  worker: ${files.worker.join(" ")}`);
  }
}
