/**
 * The Python of the SDK's tests: a virtual environment in the system's temporary folder with the
 * pinned packages of python/requirements-test.txt from PyPI and the SDK (`pip install ./python`,
 * made again each run so that it is the tree's). Outside CI, no Python or no PyPI skips the tests
 * that need it, saying why; in CI (`CI=true`) it fails them.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { venvBin } from "../bench/lib/peers.js";
import { freePort } from "./grpc-helpers.js";
import { ROOT, waitFor } from "./helpers.js";

const VENV = join(tmpdir(), "shoal-python-sdk-venv");
const PYTHON = join(VENV, "bin", "python");

/** The venv's interpreter with the SDK installed, or why there is none. */
export function pythonSdk(): { python: string; skip?: undefined } | { skip: string } {
  try {
    if (!existsSync(PYTHON)) execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
    const pip = (...args: string[]) => execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", ...args], { cwd: ROOT, stdio: "pipe", timeout: 300_000 });
    pip("-r", join(ROOT, "python", "requirements-test.txt"));
    pip("--no-deps", "--no-build-isolation", "--force-reinstall", join(ROOT, "python"));
    return { python: PYTHON };
  } catch (err) {
    const why = (err as { stderr?: Buffer }).stderr?.toString().trim().split("\n").at(-1) ?? (err as Error).message;
    if (process.env.CI === "true") throw new Error(`the Python SDK's venv could not be made: ${why}`);
    return { skip: `the Python SDK's venv could not be made (${why})` };
  }
}

/**
 * The Python of the MLServer runtimes' tests: the benchmarks' venv (bench/.venv, with MLServer as
 * bench/requirements-mlserver.txt pins it, which .ci/run installs), running the SDK from the tree
 * (`PYTHONPATH=python`). Outside CI, a venv without MLServer skips those tests, saying why; in CI
 * (`CI=true`) it fails them.
 */
export function mlserverPython(): { env: Record<string, string>; skip?: undefined } | { skip: string } {
  const python = join(ROOT, "bench", ".venv", "bin", "python");
  try {
    execFileSync(python, ["-c", "import mlserver, msgpack, numpy"], { stdio: "pipe" });
    return { env: { SHOAL_PYTHON: python, PYTHONPATH: join(ROOT, "python") } };
  } catch (err) {
    const why = `bench/.venv has no MLServer (python3 -m venv bench/.venv && bench/.venv/bin/pip install -r bench/requirements-mlserver.txt): ${(err as Error).message.split("\n")[0]}`;
    if (process.env.CI === "true") throw new Error(why);
    return { skip: why };
  }
}

/** A `mlserver start` of the benchmarks' venv, on free ports of 127.0.0.1. */
export interface MLServerProcess {
  http: string;
  grpc: string;
  /** What it wrote, for failure messages. */
  output(): string;
  /** Stops it as its operator would (SIGTERM: its pool's workers end with it), SIGKILL after 10 s. */
  stop(): Promise<void>;
}

/**
 * Starts MLServer on `folder` (its settings.json, then these MLSERVER_* variables: host, ports,
 * metrics folder) and resolves once `ready()` holds. A SIGKILL would orphan its pool's workers,
 * which ignore signals: it is stopped with SIGTERM.
 */
export async function startMLServer(folder: string, ready: (http: string) => Promise<boolean>): Promise<MLServerProcess> {
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  const metricsDir = mkdtempSync(join(tmpdir(), "shoal-mlserver-"));
  const proc = spawn(venvBin(ROOT, "mlserver"), ["start", folder], {
    env: { ...process.env, MLSERVER_HOST: "127.0.0.1", MLSERVER_HTTP_PORT: String(http), MLSERVER_GRPC_PORT: String(grpc), MLSERVER_METRICS_PORT: String(metrics), MLSERVER_METRICS_DIR: metricsDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stdout!.on("data", (chunk: Buffer) => (output += chunk));
  proc.stderr!.on("data", (chunk: Buffer) => (output += chunk));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const server: MLServerProcess = {
    http: `http://127.0.0.1:${http}`,
    grpc: `127.0.0.1:${grpc}`,
    output: () => output,
    async stop() {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      proc.stdout!.destroy();
      proc.stderr!.destroy();
      rmSync(metricsDir, { recursive: true, force: true });
    },
  };
  try {
    await waitFor("MLServer ready", () => ready(server.http).catch(() => false).then((ok) => (ok ? true : undefined)), 120_000);
  } catch (err) {
    await server.stop();
    throw new Error(`${(err as Error).message}\n${output}`);
  }
  return server;
}
