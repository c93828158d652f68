/**
 * MLServer's own `model-settings.json` and `settings.json`, read as MLServer reads them, so that an
 * MLServer repository is served unchanged: a settings file whose `implementation` names an
 * `MLModel` subclass is a model of the `"mlserver"` runtime, run by a Python worker of the shared
 * pool with the `mlserver` package's own types (docs/python.md).
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";

/** MLServer's server settings file, at the repository's root. */
export const SERVER_SETTINGS_FILE = "settings.json";

// The fields of MLServer's ModelSettings that Shoal acts on; the others pass to the runtime as
// they are written (MLServer's own types read them there).
const mlserverSchema = z.looseObject({
  name: z.string().default(""),
  implementation: z.string().min(1),
  max_batch_size: z.number().int().min(0).default(0),
  /** Seconds, as MLServer has it. */
  max_batch_time: z.number().min(0).default(0),
  parameters: z.looseObject({ version: z.string().nullish(), uri: z.string().nullish() }).nullish(),
});

/** Whether a settings file is in MLServer's format: it names an `implementation` and no `runtime`. */
export function isMLServerSettings(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && "implementation" in value && !("runtime" in value);
}

/**
 * Shoal's settings for an MLServer settings file in `folder`: the `"mlserver"` runtime running
 * `implementation`, named as written (the folder's name when empty, as MLServer does), batched
 * as MLServer's adaptive batching is (only when `max_batch_size` > 1 and `max_batch_time` > 0,
 * the time in seconds), with MLServer's `parameters` as its parameters and the file itself, as
 * written, for the runtime. Throws the zod error of a file that is not MLServer's format either.
 */
export function fromMLServer(value: Record<string, unknown>, folder: string): Record<string, unknown> {
  const settings = mlserverSchema.parse(value);
  const batched = settings.max_batch_size > 1 && settings.max_batch_time > 0;
  return {
    name: settings.name === "" ? basename(folder) : settings.name,
    runtime: "mlserver",
    class: settings.implementation,
    maxBatchSize: batched ? settings.max_batch_size : 1,
    maxWaitMs: batched ? Math.round(settings.max_batch_time * 1000) : 0,
    parameters: settings.parameters ?? {},
    mlserver: value,
  };
}

/** The version of an MLServer model: its `parameters.version`, "" when it has none. */
export function mlserverVersion(mlserver: Record<string, unknown>): string {
  const parameters = mlserver.parameters as { version?: unknown } | null | undefined;
  return typeof parameters?.version === "string" ? parameters.version : "";
}

/**
 * The Python workers an MLServer `settings.json` at `root` asks for (`parallel_workers`; its 0,
 * MLServer's "in the main process", is one worker here), or undefined when there is no such file
 * or it does not say. A file that cannot be read is an error naming it.
 */
export function serverParallelWorkers(root: string): number | undefined {
  const file = join(root, SERVER_SETTINGS_FILE);
  if (!existsSync(file)) return undefined;
  let settings: unknown;
  try {
    settings = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const workers = (settings as { parallel_workers?: unknown } | null)?.parallel_workers;
  if (workers === undefined || workers === null) return undefined;
  if (!Number.isSafeInteger(workers) || (workers as number) < 0) throw new Error(`${file}: parallel_workers: a whole number of workers, not ${JSON.stringify(workers)}`);
  return Math.max(1, workers as number);
}
