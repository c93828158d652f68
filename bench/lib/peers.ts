/**
 * What the comparison scenarios need besides wrk: a Python venv with the peers (Mosec, MLServer,
 * onnxruntime, numpy, and what a scenario adds, such as Pillow) from PyPI under bench/.venv, generated ONNX models under bench/.cache, and the
 * versions of everything measured.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { makeMlp, type MlpShape } from "../../test/fixtures/make-mlp.js";
import type { Contender } from "./sweep.js";

/** The PyPI packages of the peers: MLServer as bench/requirements-mlserver.txt pins it, the others unpinned (a fresh setup measures their latest releases). */
export const PEER_PACKAGES = ["mosec", "mlserver", "onnxruntime", "numpy"] as const;

/**
 * MLServer's version and the pin it needs (uvloop), in the one file the tests' venv in CI is made
 * from too (.ci/run): every install here is constrained by it.
 */
export const MLSERVER_REQUIREMENTS = join("bench", "requirements-mlserver.txt");
const PINS = (root: string) => ["-c", join(root, MLSERVER_REQUIREMENTS)];

export const venvDir = (root: string) => join(root, "bench", ".venv");
export const cacheDir = (root: string) => join(root, "bench", ".cache");
export const venvBin = (root: string, program: string) => join(venvDir(root), "bin", program);

function refuse(lines: string[]): never {
  process.stderr.write(["bench: " + lines[0], ...lines.slice(1), ""].join("\n"));
  process.exit(2);
}

/** A package one scenario adds to the venv: its PyPI name, the module it is imported as, and whether the scenario can do without it. */
export interface ExtraPackage {
  pip: string;
  module: string;
  optional?: boolean;
}

/** What the vision scenario adds: Pillow for its peers' image preparation, and LitServe, measured when it installs. */
export const VISION_PACKAGES: readonly ExtraPackage[] = [
  { pip: "pillow", module: "PIL" },
  { pip: "litserve", module: "litserve", optional: true },
];

// The packages scenarios add, so that their versions are reported when installed.
const EXTRA_NAMES = VISION_PACKAGES.map((p) => p.pip);

/**
 * Makes sure bench/.venv holds the peers and the scenario's `extras`, creating it and installing
 * them from PyPI when needed; exits with install instructions when python3 or its venv module is
 * missing. Returns the optional extras that would not install, each with why.
 */
export function ensurePeers(root: string, log: (line: string) => void, extras: readonly ExtraPackage[] = []): Map<string, string> {
  const python = venvBin(root, "python");
  const imports = `import ${PEER_PACKAGES.join(", ")}, uvloop; assert tuple(map(int, uvloop.__version__.split(".")[:2])) < (0, 22)`;
  if (!existsSync(python) || spawnSync(python, ["-c", imports]).status !== 0) createVenv(root, log);
  const failed = new Map<string, string>();
  for (const extra of extras) {
    if (spawnSync(python, ["-c", `import ${extra.module}`]).status === 0) continue;
    log(`adding ${extra.pip} to ${venvDir(root)} (from PyPI, once)`);
    const r = spawnSync(python, ["-m", "pip", "install", "--quiet", extra.pip, ...PINS(root)], { encoding: "utf8" });
    if (r.status === 0 && spawnSync(python, ["-c", `import ${extra.module}`]).status === 0) continue;
    const why = `\`pip install ${extra.pip}\` failed (exit ${r.status}): ${(r.stderr ?? "").trim().split("\n").at(-1) ?? ""}`;
    if (extra.optional !== true) refuse([why, "is PyPI reachable?"]);
    failed.set(extra.pip, why);
  }
  return failed;
}

function createVenv(root: string, log: (line: string) => void): void {
  const python = venvBin(root, "python");
  const probe = spawnSync("python3", ["-c", "import venv, ensurepip"], { encoding: "utf8" });
  if (probe.error !== undefined || probe.status !== 0) {
    refuse([
      probe.error !== undefined ? "python3 is not installed; the peers (Mosec, MLServer) need it." : "python3 cannot create a venv (the venv or ensurepip module is missing).",
      "Install it, then run the benchmark again (or pass --servers shoal,plain to measure without the peers):",
      "  Debian/Ubuntu:  sudo apt-get update && sudo apt-get install -y python3 python3-venv",
      "  Fedora:         sudo dnf install python3",
      "  macOS:          brew install python",
    ]);
  }
  log(`setting up ${venvDir(root)}: pip install ${[...PEER_PACKAGES, ...PINS(root)].join(" ")} (from PyPI, once)`);
  const steps: [string, string[]][] = [
    ["python3", ["-m", "venv", venvDir(root)]],
    [python, ["-m", "pip", "install", "--quiet", "--upgrade", "pip"]],
    [python, ["-m", "pip", "install", "--quiet", ...PEER_PACKAGES, ...PINS(root)]],
  ];
  for (const [file, args] of steps) {
    const r = spawnSync(file, args, { stdio: "inherit" });
    if (r.status !== 0) refuse([`\`${file} ${args.join(" ")}\` failed (exit ${r.status}); is PyPI reachable?`]);
  }
}

/** Installs this checkout's Python SDK (python/, `shoal-worker`, and msgpack) into bench/.venv, each run, so that it is the tree's. */
export function ensureShoalSdk(root: string, log: (line: string) => void): void {
  log(`installing the Python SDK (${join(root, "python")}) into ${venvDir(root)}`);
  const r = spawnSync(venvBin(root, "python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--force-reinstall", join(root, "python")], { cwd: root, encoding: "utf8" });
  if (r.status !== 0) refuse([`\`pip install ./python\` into ${venvDir(root)} failed (exit ${r.status}): ${(r.stderr ?? "").trim().split("\n").at(-1) ?? ""}`]);
}

/** Versions of the installed peer packages (and uvloop, which both peers use when present). */
export function peerVersions(root: string): Record<string, string> {
  const python = venvBin(root, "python");
  if (!existsSync(python)) return {};
  const code = `import json, importlib.metadata as m, platform
out = {"python": platform.python_version()}
for p in ${JSON.stringify([...PEER_PACKAGES, "uvloop", ...EXTRA_NAMES])}:
    try: out[p] = m.version(p)
    except m.PackageNotFoundError: pass
print(json.dumps(out))`;
  const r = spawnSync(python, ["-c", code], { encoding: "utf8" });
  return r.status === 0 ? (JSON.parse(r.stdout) as Record<string, string>) : {};
}

/** Versions of the Node side: onnxruntime-node, the npm packages a run depends on. */
export function nodeVersions(root: string): Record<string, string> {
  const version = (dir: string) => {
    try {
      return (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version;
    } catch {
      return "missing";
    }
  };
  return { node: process.version, shoal: version(root), "onnxruntime-node": version(join(root, "node_modules", "onnxruntime-node")) };
}

/** Writes the MLP to bench/.cache/<name>.onnx unless it is there; returns its path. */
export function ensureMlp(root: string, name: string, shape: MlpShape, log: (line: string) => void): string {
  mkdirSync(cacheDir(root), { recursive: true });
  const file = join(cacheDir(root), `${name}.onnx`);
  if (!existsSync(file)) {
    log(`writing ${file} (${shape.inputs}→${Array(shape.layers).fill(shape.hidden).join("→")}→${shape.outputs} MLP)`);
    makeMlp(file, shape);
  }
  return file;
}

type PeerSpec = NonNullable<Contender["spec"]>;

/** How to start a Mosec peer script of bench/peers/ (its flags are Mosec's own). */
export function mosecSpec(root: string, script: string, env: Record<string, string>, probe: PeerSpec["probe"]): PeerSpec {
  return {
    program: venvBin(root, "python"),
    runtime: "python",
    script: join("bench", "peers", script),
    args: ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warning"],
    env: { OMP_NUM_THREADS: "1", ...env },
    probe,
    startTimeoutMs: 120_000,
  };
}

/**
 * How to start `mlserver start <dir>`. Its settings.json holds no ports, so that they come from the
 * environment (MLServer lets a file win over a variable): HTTP on the chosen port, gRPC and metrics
 * on other free ones, the multiprocess metrics files under bench/.cache.
 */
export function mlserverSpec(root: string, dir: string, env: Record<string, string>, probe: PeerSpec["probe"]): PeerSpec {
  const metricsDir = join(cacheDir(root), "mlserver-metrics");
  mkdirSync(metricsDir, { recursive: true });
  return {
    program: venvBin(root, "mlserver"),
    runtime: "python",
    script: "start",
    args: [dir],
    env: {
      MLSERVER_HOST: "127.0.0.1",
      MLSERVER_HTTP_PORT: "{port}",
      MLSERVER_GRPC_PORT: "{free}",
      MLSERVER_METRICS_PORT: "{free}",
      MLSERVER_METRICS_DIR: metricsDir,
      OMP_NUM_THREADS: "1",
      ...env,
    },
    probe,
    startTimeoutMs: 180_000,
  };
}
