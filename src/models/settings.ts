/**
 * A model's settings: the `model-settings.json` file of a model folder, or the object given to
 * `Server.addModel()`. Checked with zod, so that a mistake is reported with the file and field.
 */
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { z } from "zod";
import { fromMLServer, isMLServerSettings } from "./mlserver-settings.js";
import { V2_DATATYPES } from "../tensor/datatypes.js";
import type { TensorMetadata } from "../v2/types.js";
import { checkPrioritySettings, prioritySettingsShape } from "../stage-options.js";

export type { TensorMetadata };

const tensorMetadata = z.strictObject({
  name: z.string().min(1),
  datatype: z.enum(V2_DATATYPES),
  /** -1 for a dimension of any size. */
  shape: z.array(z.number().int().min(-1)),
}) satisfies z.ZodType<TensorMetadata>;

const NAME = /^[A-Za-z0-9_.-]+$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The schema of a settings file; every field is described in docs/models.md. */
export const modelSettingsSchema = z.strictObject({
  name: z.string().regex(NAME, "letters, digits, '_', '.' and '-' only"),
  /** Version folders (`"1"`, `"2"`); default: the folders whose names are whole numbers, else none (unversioned). */
  versions: z.array(z.string().regex(NAME, "letters, digits, '_', '.' and '-' only")).min(1).optional(),
  /** `"onnx"`, `"llama"` (a GGUF language model), or the path (from the model folder) of a module that exports a Worker class. */
  runtime: z.string().min(1),
  /** The Python class of the `"python"` runtime (`model.py:Classify`, from the model folder), or the `MLModel` subclass of `"mlserver"`. */
  class: z.string().min(1).optional(),
  /** An MLServer settings file as written, for the `"mlserver"` runtime (set when the file is in MLServer's format). */
  mlserver: z.record(z.string(), z.unknown()).optional(),
  /** The `.onnx` (or, for `"llama"`, `.gguf`) file in each version folder (default: the only one there). */
  file: z.string().min(1).optional(),
  maxBatchSize: z.number().int().min(1).default(1),
  maxWaitMs: z.union([z.number().int().min(0), z.literal("auto")]).default(0),
  /** Workers of the shared pool the model is loaded on. */
  replicas: z.number().int().min(1).default(1),
  /** What one replica costs of the pool's memory budget (default: its files' size). */
  memoryBytes: z.number().int().min(0).optional(),
  /** Passed to the model's Worker as `parameters`; `{"env": "NAME"}` is read from the environment. */
  parameters: z
    .record(z.string(), z.unknown())
    .superRefine((parameters, ctx) => {
      for (const [key, value] of Object.entries(parameters)) {
        if (isEnvReference(value) && (typeof value.env !== "string" || !ENV_NAME.test(value.env))) {
          ctx.addIssue({ code: "custom", path: [key, "env"], message: "the name of an environment variable (letters, digits and '_', not starting with a digit)" });
        }
      }
    })
    .default({}),
  /** Metadata of a module runtime's inputs and outputs (an ONNX model reports its own). */
  inputs: z.array(tensorMetadata).optional(),
  outputs: z.array(tensorMetadata).optional(),
  /** Priority levels and queue policies, Triton's names in camelCase (docs/scheduling.md). */
  ...prioritySettingsShape,
}).superRefine((settings, ctx) => {
  checkPrioritySettings(settings, ctx);
  if ((settings.runtime === "python" || settings.runtime === "mlserver") && settings.class === undefined) {
    ctx.addIssue({ code: "custom", path: ["class"], message: `the ${settings.runtime} runtime runs a class: name it, as "model.py:Classify"` });
  }
});

/** Settings as written: defaults may be left out. */
export type ModelSettingsInput = z.input<typeof modelSettingsSchema>;

/** Settings with every default filled in. */
export type ModelSettings = z.output<typeof modelSettingsSchema>;

/** Settings that do not validate: the message names where they come from and the fields at fault. */
export class SettingsError extends Error {
  override name = "SettingsError";

  constructor(
    message: string,
    /** The model folder the settings are in, when they come from a repository. */
    readonly folder = "",
  ) {
    super(message);
  }
}

/** Checks settings given in code or read from `source` (a file path, for the message). */
export function parseSettings(value: unknown, source: string): ModelSettings {
  const parsed = modelSettingsSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new SettingsError(`${source}: ${zodProblems(parsed.error)}`);
}

/** Reads and checks a `model-settings.json` file. */
export function readSettingsFile(file: string): ModelSettings {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new SettingsError(`${file}: cannot read it: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SettingsError(`${file}: not JSON: ${(err as Error).message}`);
  }
  if (!isMLServerSettings(value)) return parseSettings(value, file);
  try {
    return parseSettings(fromMLServer(value, dirname(file)), file);
  } catch (err) {
    if (err instanceof z.ZodError) throw new SettingsError(`${file}: ${zodProblems(err)}`);
    throw err;
  }
}

// Each field at fault and what is wrong with it.
function zodProblems(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`).join("; ");
}

// A parameter given as `{"env": NAME}` (that key alone) is read from the environment.
function isEnvReference(value: unknown): value is { env: unknown } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === "env";
}

/**
 * The parameters a model gets: those of its settings, with each `{"env": "NAME"}` replaced by
 * the value of the environment variable NAME. The settings keep the reference, so that the
 * value is never shown. Throws a {@link SettingsError} naming the parameter and the variable,
 * never a value, when a variable is not set.
 */
export function resolveParameters(parameters: Record<string, unknown>, source: string, env: NodeJS.ProcessEnv = process.env): Record<string, unknown> {
  const resolved: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parameters)) {
    if (!isEnvReference(value)) {
      resolved[key] = value;
      continue;
    }
    const name = value.env as string;
    const secret = env[name];
    if (secret === undefined) throw new SettingsError(`${source}: parameters.${key}: the environment variable ${name} is not set`);
    resolved[key] = secret;
  }
  return resolved;
}
