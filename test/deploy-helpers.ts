/** Shared by the deployment tests: the example model repository, and talking to it. */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { Client, outputOf } from "shoal/client";
import { ROOT } from "./helpers.js";

/** The example repository, as the README serves it. */
export const EXAMPLE_MODELS = join(ROOT, "examples", "models");

const FRAME = 1536; // 96 ms at 16 kHz

/** examples/hello.wav (16-bit mono PCM at 16 kHz) as samples in [-1, 1]. */
export function helloSamples(): Float32Array {
  const wav = readFileSync(join(ROOT, "examples", "hello.wav"));
  const data = wav.indexOf("data") + 8;
  const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset + data, wav.byteOffset + wav.length - ((wav.length - data) % 2)));
  return Float32Array.from(pcm, (s) => s / 32768);
}

/**
 * Silero VAD's probability of speech in each 96 ms frame of `samples`, one V2 request a frame,
 * each carrying the state (`hn`, `cn`) the previous one returned.
 */
export async function speechProbabilities(url: string, samples: Float32Array): Promise<number[]> {
  const client = new Client(url);
  const probabilities: number[] = [];
  let h = new Float32Array(128);
  let c = new Float32Array(128);
  for (let at = 0; at < samples.length; at += FRAME) {
    const frame = new Float32Array(FRAME);
    frame.set(samples.subarray(at, at + FRAME));
    const response = await client.v2.infer("silero-vad", {
      inputs: [
        { name: "input", shape: [1, FRAME], data: frame },
        { name: "sr", shape: [], data: BigInt64Array.of(16000n) },
        { name: "h", shape: [2, 1, 64], data: h },
        { name: "c", shape: [2, 1, 64], data: c },
      ],
    });
    probabilities.push(outputOf(response, "output").data[0] as number);
    h = Float32Array.from(outputOf(response, "hn").data as Float32Array);
    c = Float32Array.from(outputOf(response, "cn").data as Float32Array);
  }
  return probabilities;
}


/** Where the deployment tests keep what they build or fetch between runs. */
export const CACHE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "shoal-deploy");

/** The Helm release the chart is checked with, built from the Go module proxy. */
export const HELM_VERSION = "v3.22.0";

/** The kserve release whose OpenAPI models KServe objects are checked against. */
export const KSERVE_VERSION = "0.21.0";

/** A tool at `path`, or why it cannot be had on this machine. */
export type Tool = { path: string; skip?: undefined } | { skip: string; path?: undefined };

/** Runs a command; resolves with its output, rejects with it on a non-zero exit. */
export async function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {}): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: options.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 600_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else reject(Object.assign(new Error(`${command} ${args.join(" ")} exited ${code}\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}`), { stdout, stderr, code }));
    });
    // A command that does not read its input may close it first.
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
  });
}

/** Whether `command` is on the PATH. */
export async function found(command: string): Promise<boolean> {
  return run("sh", ["-c", `command -v ${command}`]).then(() => true, () => false);
}

// Go, with the settings the tools are built with.
const goEnv = (): NodeJS.ProcessEnv => ({ ...process.env, GOFLAGS: "-buildvcs=false" });

/** Helm, built once with `go install` from the Go module proxy and kept in the cache. */
export async function helm(): Promise<Tool> {
  const dir = join(CACHE, `helm-${HELM_VERSION}`);
  const path = join(dir, "helm");
  if (existsSync(path)) return { path };
  if (!(await found("go"))) return { skip: "Go is not installed, so Helm cannot be built from the Go module proxy" };
  try {
    await run("go", ["install", `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`], { cwd: tmpdir(), env: { ...goEnv(), GOBIN: dir } });
  } catch (err) {
    return { skip: `Helm ${HELM_VERSION} could not be built: ${(err as Error).message.split("\n").slice(0, 3).join(" ")}` };
  }
  return { path };
}

/** The manifest checker of deploy/check, built once per version of its sources. */
export async function checker(): Promise<Tool> {
  const source = join(ROOT, "deploy", "check");
  const hash = createHash("sha256");
  for (const file of readdirSync(source).sort()) if (/\.(go|mod|sum)$/.test(file)) hash.update(file).update(readFileSync(join(source, file)));
  const path = join(CACHE, `check-${hash.digest("hex").slice(0, 16)}`);
  if (existsSync(path)) return { path };
  if (!(await found("go"))) return { skip: "Go is not installed, so the manifest checker (deploy/check) cannot be built" };
  await run("go", ["build", "-o", path, "."], { cwd: source, env: goEnv() });
  return { path };
}

/** KServe's Python wheel (its OpenAPI models), fetched once from PyPI with pip. */
export async function kserveWheel(): Promise<Tool> {
  const path = join(CACHE, `kserve-${KSERVE_VERSION}-py3-none-any.whl`);
  if (existsSync(path)) return { path };
  mkdirSync(CACHE, { recursive: true });
  try {
    await run("python3", ["-m", "pip", "download", "--no-deps", "--quiet", "--dest", CACHE, `kserve==${KSERVE_VERSION}`]);
  } catch (err) {
    return { skip: `the kserve ${KSERVE_VERSION} wheel could not be fetched with pip: ${(err as Error).message.split("\n").slice(0, 3).join(" ")}` };
  }
  return existsSync(path) ? { path } : { skip: `pip fetched no ${path}` };
}
