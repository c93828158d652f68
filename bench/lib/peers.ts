/**
 * What the comparison scenarios need besides wrk: a Python venv with the peers (Mosec, MLServer,
 * onnxruntime, numpy) from PyPI under bench/.venv, generated ONNX models under bench/.cache, and the
 * versions of everything measured.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { makeMlp, type MlpShape } from "../../test/fixtures/make-mlp.js";
import type { Contender } from "./sweep.js";

/** The PyPI packages of the peers, unpinned: a fresh setup measures their latest releases. */
export const PEER_PACKAGES = ["mosec", "mlserver", "onnxruntime", "numpy"] as const;

/**
 * MLServer 1.7's worker processes die at start-up with uvloop 0.22 or later ("There is no current
 * event loop", SeldonIO/MLServer#2286, open): the one pin, a known workaround.
 */
const PINS = ["uvloop<0.22"];

export const venvDir = (root: string) => join(root, "bench", ".venv");
export const cacheDir = (root: string) => join(root, "bench", ".cache");
export const venvBin = (root: string, program: string) => join(venvDir(root), "bin", program);

function refuse(lines: string[]): never {
  process.stderr.write(["bench: " + lines[0], ...lines.slice(1), ""].join("\n"));
  process.exit(2);
}

/**
 * Makes sure bench/.venv holds the peers, creating it and installing them from PyPI when needed;
 * exits with install instructions when python3 or its venv module is missing.
 */
export function ensurePeers(root: string, log: (line: string) => void): void {
  const python = venvBin(root, "python");
  const imports = `import ${PEER_PACKAGES.join(", ")}, uvloop; assert tuple(map(int, uvloop.__version__.split(".")[:2])) < (0, 22)`;
  if (existsSync(python) && spawnSync(python, ["-c", imports]).status === 0) return;
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
  log(`setting up ${venvDir(root)}: pip install ${[...PEER_PACKAGES, ...PINS].join(" ")} (from PyPI, once)`);
  const steps: [string, string[]][] = [
    ["python3", ["-m", "venv", venvDir(root)]],
    [python, ["-m", "pip", "install", "--quiet", "--upgrade", "pip"]],
    [python, ["-m", "pip", "install", "--quiet", ...PEER_PACKAGES, ...PINS]],
  ];
  for (const [file, args] of steps) {
    const r = spawnSync(file, args, { stdio: "inherit" });
    if (r.status !== 0) refuse([`\`${file} ${args.join(" ")}\` failed (exit ${r.status}); is PyPI reachable?`]);
  }
}

/** Versions of the installed peer packages (and uvloop, which both peers use when present). */
export function peerVersions(root: string): Record<string, string> {
  const python = venvBin(root, "python");
  if (!existsSync(python)) return {};
  const code = `import json, importlib.metadata as m, platform
out = {"python": platform.python_version()}
for p in ${JSON.stringify([...PEER_PACKAGES, "uvloop"])}:
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
