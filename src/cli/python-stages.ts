import { Command, Option } from "commander";
import { z } from "zod";
import { addServerFlags, serverConfigOf } from "../config.js";
import { Server } from "../app/server.js";
import { python } from "../python.js";

// One stage as a Python front end (the SDK's Mosec server, say) describes it.
const stageSchema = z
  .object({
    target: z.string().min(1),
    interpreter: z.string().min(1).optional(),
    cwd: z.string().min(1).optional(),
    streaming: z.boolean().optional(),
    num: z.number().int().min(1).optional(),
    maxBatchSize: z.number().int().min(1).optional(),
    maxWaitMs: z.number().min(0).optional(),
    timeoutMs: z.number().int().min(1).optional(),
    route: z.union([z.string(), z.array(z.string())]).optional(),
    env: z.array(z.record(z.string(), z.string())).optional(),
  })
  .strict();

// How the SDK's Mosec server asks for Mosec's answers (config.ts, MosecCompat).
const mosecSchema = z
  .object({
    namespace: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/, "letters, digits and underscores, not starting with a digit"),
    openapi: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/**
 * `shoal python --stages JSON`: a server of Python stages only, each `{target: "file.py:Class",
 * num, maxBatchSize, ...}`, with the server flags. The SDK's `shoal.mosec.Server.run()` starts it.
 */
export function pythonCommand(): Command {
  const command = new Command("python")
    .description("Serve Python Worker classes (the shoal-worker SDK) as stages: what a Python front end such as shoal.mosec starts.")
    .helpOption("-h, --help", "show this help")
    .allowExcessArguments(false)
    .addOption(new Option("--stages <json>", "the stages, in order: a JSON array of {target, interpreter?, cwd?, streaming?, num?, maxBatchSize?, maxWaitMs?, timeoutMs?, route?, env?}").makeOptionMandatory())
    .addOption(new Option("--mosec <json>", "answer as a Mosec server does (what shoal.mosec asks): {namespace, openapi?}, the prefix of Mosec's metric names and its OpenAPI document"));
  addServerFlags(command);
  command.action(async () => {
    const { stages, mosec } = command.opts() as { stages: string; mosec?: string };
    const read = <T>(flag: string, schema: z.ZodType<T>, text: string): T => {
      try {
        return schema.parse(JSON.parse(text));
      } catch (err) {
        return command.error(`error: ${flag}: ${err instanceof z.ZodError ? err.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") : (err as Error).message}`);
      }
    };
    const specs = read("--stages", z.array(stageSchema).min(1), stages);
    const compat = mosec === undefined ? undefined : read("--mosec", mosecSchema, mosec);
    const server = new Server();
    try {
      for (const { target, interpreter, cwd, streaming, ...options } of specs) server.appendWorker(python(target, { interpreter, cwd, streaming }), options);
    } catch (err) {
      command.error(`error: ${(err as Error).message}`);
    }
    await server.run({ ...serverConfigOf(command), mosec: compat });
  });
  return command;
}
