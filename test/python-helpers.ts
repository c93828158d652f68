/**
 * The Python of the SDK's tests: a virtual environment in the system's temporary folder with the
 * pinned packages of python/requirements-test.txt from PyPI and the SDK (`pip install ./python`,
 * made again each run so that it is the tree's). Outside CI, no Python or no PyPI skips the tests
 * that need it, saying why; in CI (`CI=true`) it fails them.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./helpers.js";

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
