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
 * The fields of MLServer's server settings that Shoal acts on: the Python workers
 * (`parallel_workers`), the ports and address `shoal serve` takes when no flag gives them
 * (`http_port`, `grpc_port`, `host`), and what `GET /v2` says of an MLServer repository
 * (`server_name`, `server_version`, `extensions`).
 */
export interface MLServerServerSettings {
  parallel_workers?: number;
  http_port?: number;
  grpc_port?: number;
  host?: string;
  server_name?: string;
  server_version?: string;
  extensions?: string[];
}

// Each field as MLServer's Settings takes it from its MLSERVER_* variable (pydantic-settings:
// a list as JSON), for a field the file does not set: MLServer's files win over the environment.
const SERVER_FIELDS = {
  parallel_workers: (text: string) => Number(text),
  http_port: (text: string) => Number(text),
  grpc_port: (text: string) => Number(text),
  host: (text: string) => text,
  server_name: (text: string) => text,
  server_version: (text: string) => text,
  extensions: (text: string) => JSON.parse(text) as unknown,
} as const;

const WORKERS = "a whole number of workers";
const PORT = "a TCP port";
const serverSchema = z.object({
  parallel_workers: z.number(WORKERS).int(WORKERS).min(0, WORKERS).nullish(),
  http_port: z.number(PORT).int(PORT).min(0, PORT).max(65535, PORT).nullish(),
  grpc_port: z.number(PORT).int(PORT).min(0, PORT).max(65535, PORT).nullish(),
  host: z.string().nullish(),
  server_name: z.string().nullish(),
  server_version: z.string().nullish(),
  extensions: z.array(z.string()).nullish(),
});

/**
 * MLServer's server settings of the repository at `root`: its `settings.json`, the `MLSERVER_*`
 * variables of `env` filling the fields the file leaves out, as MLServer reads them. A file or
 * a variable that cannot be read is an error naming it.
 */
export function mlserverServerSettings(root: string, env: NodeJS.ProcessEnv = process.env): MLServerServerSettings {
  const file = join(root, SERVER_SETTINGS_FILE);
  let written: Record<string, unknown> = {};
  if (existsSync(file)) {
    try {
      written = (JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown> | null) ?? {};
    } catch (err) {
      throw new Error(`${file}: ${(err as Error).message}`);
    }
  }
  const settings: Record<string, unknown> = {};
  for (const [field, read] of Object.entries(SERVER_FIELDS)) {
    const variable = `MLSERVER_${field.toUpperCase()}`;
    if (written[field] !== undefined && written[field] !== null) settings[field] = written[field];
    else if (env[variable] !== undefined) {
      try {
        settings[field] = read(env[variable]);
      } catch {
        throw new Error(`${variable}: not JSON: ${env[variable]}`);
      }
    }
  }
  const parsed = serverSchema.safeParse(settings);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = String(issue.path[0]);
    throw new Error(`${written[field] === undefined ? `MLSERVER_${field.toUpperCase()}` : file}: ${field}: ${issue.message}, not ${JSON.stringify(settings[field])}`);
  }
  const out: MLServerServerSettings = {};
  for (const [field, value] of Object.entries(parsed.data)) if (value !== undefined && value !== null) (out as Record<string, unknown>)[field] = value;
  return out;
}

/**
 * The Python workers an MLServer repository at `root` asks for (`parallel_workers` of its
 * `settings.json`, else `MLSERVER_PARALLEL_WORKERS`; its 0, MLServer's "in the main process", is
 * one worker here), or undefined when neither says.
 */
export function serverParallelWorkers(root: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const workers = mlserverServerSettings(root, env).parallel_workers;
  return workers === undefined ? undefined : Math.max(1, workers);
}
