import { isAbsolute, join, resolve } from "node:path";
import { Worker, type StreamSettings, type WorkerClass } from "./worker.js";
import type { Launch } from "./workers/process-launch.js";

/** How a Python stage's workers are started. */
export interface PythonOptions {
  /**
   * The Python interpreter (a path or a command on `PATH`). Defaults to the `bin/python` of
   * {@link PythonOptions.venv} when given, else to `$SHOAL_PYTHON`, else to `python3`.
   */
  interpreter?: string;
  /** A virtual environment whose interpreter runs the workers (the SDK, `shoal-worker`, installed in it). */
  venv?: string;
  /** The workers' working directory, where a relative file in the target is found. Defaults to the server's. */
  cwd?: string;
  /** Whether the class streams (a `forward()` that returns generators), as a Worker's static `streaming`. */
  streaming?: boolean | StreamSettings;
}

const PYTHON = Symbol("python");

/** A Worker class that stands for a Python class: what starts its workers. */
type PythonClass = WorkerClass & { readonly [PYTHON]: Launch };

/**
 * A stage that runs a Python class: `target` is `path/to/file.py:Class` (from `cwd`) or
 * `package.module:Class`, a class with `forward()` written with the `shoal-worker` package
 * (`pip install ./python`; docs/python.md). Each worker of the stage is a Python process speaking
 * the worker wire protocol, with a Node.js process worker's life cycle: warm-up, forward timeout,
 * replacement with back-off, drain, `/readyz` and metrics. Pass it to `appendWorker()`, whose
 * options (`num`, `maxBatchSize`, `env` per worker, ...) apply as to any stage.
 *
 * @example
 * ```ts
 * server.appendWorker(python("model.py:Classify", { venv: ".venv" }), { num: 2, maxBatchSize: 16 });
 * ```
 */
export function python(target: string, options: PythonOptions = {}): WorkerClass {
  const colon = target.lastIndexOf(":");
  const name = target.slice(colon + 1);
  if (colon <= 0 || !/^[A-Za-z_]\w*$/.test(name)) throw new TypeError(`python('${target}'): name a class, as 'file.py:Class' or 'module:Class'`);
  const cwd = options.cwd === undefined ? undefined : resolve(options.cwd);
  const interpreter = options.interpreter ?? (options.venv !== undefined ? join(resolve(options.venv), "bin", "python") : undefined);
  const launch: Launch = { file: interpreterPath(interpreter), args: ["-m", "shoal", target], cwd };
  // A class of the Python class's name, so that the stage is named after it; its forward() is
  // never called here: the workers are Python processes.
  const cls = {
    [name]: class extends Worker {
      static readonly [PYTHON] = launch;
      static override streaming = options.streaming ?? false;
      override forward(): never {
        throw new Error(`${name} runs in Python workers`);
      }
    },
  }[name]!;
  return cls;
}

/** How the workers of a Python stage's class start; undefined for any other class. */
export function pythonLaunch(cls: WorkerClass): Launch | undefined {
  return (cls as Partial<PythonClass>)[PYTHON];
}

/**
 * How a Python worker of the shared model pool starts: `$SHOAL_PYTHON` (else `python3`), with the
 * SDK (`shoal-worker`) installed, hosting the models of the Python runtimes (docs/python.md).
 */
export function modelHostLaunch(): Launch {
  return { file: interpreterPath(undefined), args: ["-m", "shoal", "--models"] };
}

// A path with a folder in it is taken from the server's working directory; a bare name is found on PATH.
function interpreterPath(given: string | undefined): string {
  const interpreter = given ?? process.env.SHOAL_PYTHON ?? "python3";
  return isAbsolute(interpreter) || !interpreter.includes("/") ? interpreter : resolve(interpreter);
}
