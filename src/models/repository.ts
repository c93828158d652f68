/**
 * The model repository: a folder with one folder per model, each holding a `model-settings.json`
 * and the model's files, in version folders (`1/`, `2/`) or directly; or a folder that is itself
 * one model's folder, as KServe's storage initializer leaves `/mnt/models`. Every file the
 * settings name stays inside the model's folder once symlinks are resolved.
 */
import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { mlserverVersion } from "./mlserver-settings.js";
import { SettingsError, parseSettings, readSettingsFile, resolveParameters, type ModelSettings, type TensorMetadata } from "./settings.js";

/** The settings file of a model folder. */
export const SETTINGS_FILE = "model-settings.json";

/** One version of a model, ready to be loaded on workers. */
export interface ModelSpec {
  name: string;
  /** "" for a model without version folders. */
  version: string;
  /** `"onnx"`, `"llama"`, or the file URL of the module that exports the model's Worker class. */
  runtime: string;
  /** The version's folder (the model folder when unversioned), symlinks resolved. */
  dir: string;
  /** The model file (`.onnx` for the ONNX runtime, `.gguf` for llama.cpp), symlinks resolved. */
  file: string | undefined;
  maxBatchSize: number;
  maxWaitMs: number | "auto";
  replicas: number;
  /** What one replica costs of the pool's memory budget, in bytes. */
  costBytes: number;
  /** The parameters the model gets: those of the settings, with environment references read. */
  parameters: Record<string, unknown>;
  inputs: TensorMetadata[] | undefined;
  outputs: TensorMetadata[] | undefined;
  /** The settings as given (environment references unread), for `GET /v2/models/{m}/config`. */
  settings: ModelSettings;
  /** The class a Python runtime runs: `/abs/model.py:Class` for `"python"`, the `MLModel` subclass's import path for `"mlserver"`. */
  class?: string;
  /** An MLServer settings file as written, for the `"mlserver"` runtime. */
  mlserver?: Record<string, unknown>;
}

/** Whether a runtime runs in the Python workers of the shared pool. */
export function isPythonRuntime(runtime: string): boolean {
  return PYTHON_RUNTIMES.has(runtime);
}

// The runtimes of the Python workers: a class of one's own, and MLServer's MLModel subclasses.
const PYTHON_RUNTIMES: ReadonlySet<string> = new Set(["python", "mlserver"]);

/** What a repository scan found: the models it can load, and the folders it could not read. */
export interface Scan {
  specs: ModelSpec[];
  errors: SettingsError[];
}

/**
 * Reads every model folder of `root`. A broken folder is reported in `errors`; the others load.
 * A `root` that is itself a model folder is one model named `modelName` (by default, the name
 * its settings give): one with a `model-settings.json`, or one with no settings and no model
 * folders but `.onnx` files, directly or in version folders, served with the ONNX runtime and
 * named after the folder by default.
 */
export function scanRepository(root: string, modelName?: string): Scan {
  const specs: ModelSpec[] = [];
  const errors: SettingsError[] = [];
  let entries: string[];
  try {
    entries = readdirSync(root).sort();
  } catch (err) {
    throw new Error(`cannot read the model repository ${root}: ${(err as Error).message}`);
  }
  if (entries.includes(SETTINGS_FILE)) {
    const file = join(root, SETTINGS_FILE);
    return rootModel(root, file, modelName, () => readSettingsFile(file));
  }
  for (const entry of entries) {
    const folder = join(root, entry);
    const file = join(folder, SETTINGS_FILE);
    if (!statSync(folder).isDirectory() || !existsSync(file)) continue;
    try {
      specs.push(...specsOf(readSettingsFile(file), folder, file));
    } catch (err) {
      errors.push(new SettingsError(err instanceof SettingsError ? err.message : `${file}: ${(err as Error).message}`, entry));
    }
  }
  if (specs.length === 0 && errors.length === 0 && holdsOnnx(root)) {
    const name = modelName ?? basename(root);
    return rootModel(root, root, modelName, () => parseSettings({ name, runtime: "onnx" }, `${root} (an ONNX model without ${SETTINGS_FILE})`));
  }
  return { specs, errors };
}

// The one model whose folder is the repository's root, under the name asked for.
function rootModel(root: string, source: string, modelName: string | undefined, read: () => ModelSettings): Scan {
  let settings: ModelSettings | undefined;
  try {
    settings = read();
    const named = modelName === undefined ? settings : { ...settings, name: modelName };
    return { specs: specsOf(named, root, source), errors: [] };
  } catch (err) {
    const message = err instanceof SettingsError ? err.message : `${source}: ${(err as Error).message}`;
    return { specs: [], errors: [new SettingsError(message, modelName ?? settings?.name ?? basename(root))] };
  }
}

// Whether `dir` holds `.onnx` files, directly or in version folders.
function holdsOnnx(dir: string): boolean {
  const entries = readdirSync(dir, { withFileTypes: true });
  if (entries.some((e) => !e.isDirectory() && e.name.endsWith(".onnx"))) return true;
  return entries.some((e) => e.isDirectory() && /^\d+$/.test(e.name) && readdirSync(join(dir, e.name)).some((f) => f.endsWith(".onnx")));
}

/**
 * The versions of a model whose files are in `folder`. Throws a {@link SettingsError} naming
 * `source` when a version folder, the model file or the runtime module is missing or outside
 * `folder` (symlinks resolved), or when an environment variable a parameter names is not set.
 */
export function specsOf(settings: ModelSettings, folder: string, source: string): ModelSpec[] {
  if (!existsSync(folder)) throw new SettingsError(`${source}: there is no folder ${folder}`);
  const root = realpathSync(folder);
  const parameters = resolveParameters(settings.parameters, source);
  if (isPythonRuntime(settings.runtime)) return [pythonSpec(settings, root, source, parameters)];
  const versions = settings.versions ?? versionFolders(root);
  const runtime = settings.runtime in FILE_RUNTIMES ? settings.runtime : moduleUrl(settings.runtime, root, source);
  return (versions.length === 0 ? [""] : versions).map((version) => {
    const given = join(root, version);
    if (!existsSync(given)) throw new SettingsError(`${source}: versions: there is no folder ${given}`);
    const dir = version === "" ? root : inside(root, given, source, "versions", version);
    const extension = FILE_RUNTIMES[runtime];
    const file = extension === undefined ? undefined : modelFile(settings, root, dir, source, extension);
    return {
      name: settings.name,
      version,
      runtime,
      dir,
      file,
      maxBatchSize: settings.maxBatchSize,
      maxWaitMs: settings.maxWaitMs,
      replicas: settings.replicas,
      costBytes: settings.memoryBytes ?? sizeOf(dir),
      parameters,
      inputs: settings.inputs,
      outputs: settings.outputs,
      settings,
    };
  });
}

// A model of a Python runtime: its files are its folder. An MLServer model's version is its
// `parameters.version` (MLServer's versions are labels, not folders); a `"python"` class's file is
// found from the model folder, and stays inside it.
function pythonSpec(settings: ModelSettings, root: string, source: string, parameters: Record<string, unknown>): ModelSpec {
  const given = settings.class!;
  const colon = given.lastIndexOf(":");
  const file = given.slice(0, colon);
  let cls = given;
  if (settings.runtime === "python") {
    if (colon <= 0 || !file.endsWith(".py")) throw new SettingsError(`${source}: class: '${given}' names no class: write "model.py:Classify"`);
    const path = resolve(root, file);
    if (!existsSync(path)) throw new SettingsError(`${source}: class: no file ${path}`);
    cls = `${inside(root, path, source, "class", file)}${given.slice(colon)}`;
  }
  const mlserver = settings.mlserver;
  return {
    name: settings.name,
    version: mlserver === undefined ? "" : mlserverVersion(mlserver),
    runtime: settings.runtime,
    dir: root,
    file: undefined,
    maxBatchSize: settings.maxBatchSize,
    maxWaitMs: settings.maxWaitMs,
    replicas: settings.replicas,
    costBytes: settings.memoryBytes ?? sizeOf(root),
    parameters,
    inputs: settings.inputs,
    outputs: settings.outputs,
    settings,
    class: cls,
    ...(mlserver === undefined ? {} : { mlserver }),
  };
}

/**
 * The version served when a request names none: the unversioned one, else the greatest whole
 * number, else the last in string order.
 */
export function defaultVersion(versions: readonly string[]): string | undefined {
  if (versions.includes("")) return "";
  return [...versions].sort(compareVersions).at(-1);
}

function compareVersions(a: string, b: string): number {
  const x = Number(a);
  const y = Number(b);
  if (Number.isInteger(x) && Number.isInteger(y)) return x - y;
  return a < b ? -1 : a > b ? 1 : 0;
}

function versionFolders(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true })
    .filter((e) => e.isDirectory() && /^\d+$/.test(e.name))
    .map((e) => e.name)
    .sort(compareVersions);
}

// The real path of `path`, which must be the model folder `root` (a real path) or under it: a
// setting that leads elsewhere, by `..`, an absolute path or a symlink, is refused.
function inside(root: string, path: string, source: string, field: string, given: string): string {
  const real = realpathSync(path);
  const rel = relative(root, real);
  if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) throw new SettingsError(`${source}: ${field}: '${given}' is outside the model folder ${root}`);
  return real;
}

function moduleUrl(path: string, root: string, source: string): string {
  const file = resolve(root, path);
  if (!existsSync(file)) throw new SettingsError(`${source}: runtime: no module ${file} (give "onnx", "llama" or the path of a module that exports a Worker)`);
  return pathToFileURL(inside(root, file, source, "runtime", path)).href;
}

// The built-in runtimes, each serving a file of its own kind: ONNX Runtime and llama.cpp.
const FILE_RUNTIMES: Readonly<Record<string, string>> = { onnx: ".onnx", llama: ".gguf" };

function modelFile(settings: ModelSettings, root: string, dir: string, source: string, extension: string): string {
  if (settings.file !== undefined) {
    const file = join(dir, settings.file);
    if (!existsSync(file)) throw new SettingsError(`${source}: file: there is no ${file}`);
    return inside(root, file, source, "file", settings.file);
  }
  const found = readdirSync(dir).filter((f) => f.endsWith(extension));
  if (found.length !== 1) {
    throw new SettingsError(`${source}: file: ${dir} holds ${found.length === 0 ? `no ${extension} file` : `${found.length} ${extension} files`}; name the one to serve`);
  }
  return inside(root, join(dir, found[0]!), source, "file", found[0]!);
}

// The bytes of the files under `dir`: what loading them costs, unless the settings say otherwise.
function sizeOf(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    bytes += entry.isDirectory() ? sizeOf(path) : statSync(path).size;
  }
  return bytes;
}
