/** Shared by the ONNX and CLI tests: models made at test time, `shoal serve`, and metrics. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeEmbedding } from "./fixtures/make-embedding.js";
import { makeMlp, type MlpShape } from "./fixtures/make-mlp.js";
import { ROOT, ServerProcess, send } from "./helpers.js";

/** The `shoal` command as npm links it: the compiled CLI. */
export const CLI = join(ROOT, "dist", "cli", "main.js");

/** A folder of models written for one test file; `remove()` deletes it. */
export class ModelDir {
  readonly dir = mkdtempSync(join(tmpdir(), "shoal-onnx-"));

  /** Writes an MLP as `<name>.onnx` and returns its path. */
  mlp(name: string, shape: MlpShape): string {
    const file = join(this.dir, `${name}.onnx`);
    makeMlp(file, shape);
    return file;
  }

  /** Writes an embedding lookup of `rows` rows of `width` as `<name>.onnx` and returns its path (make-embedding.ts). */
  embedding(name: string, rows: number, width: number): string {
    const file = join(this.dir, `${name}.onnx`);
    makeEmbedding(file, rows, width);
    return file;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts `shoal serve <model> --port 0 --address 127.0.0.1 ...args` and resolves once it is ready. */
export function serveModel(model: string, args: string[] = [], env: Record<string, string> = {}): Promise<ServerProcess> {
  return serveCli([model], args, env, 30_000);
}

/**
 * Starts `shoal serve ...head --port 0 --address 127.0.0.1 ...args` and resolves once it is ready,
 * within `readyMs`.
 */
export async function serveCli(head: string[], args: string[], env: Record<string, string>, readyMs: number): Promise<ServerProcess> {
  const server = new ServerProcess(CLI, ["serve", ...head, "--port", "0", "--address", "127.0.0.1", ...args], env);
  try {
    const listening = await server.waitForLog((l) => l.msg?.startsWith("listening on http://") ?? false, 30_000);
    server.port = listening.port as number;
    await server.waitForLog((l) => l.msg === "ready", readyMs);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/** The `shoal_stage_batch_size` histogram of one stage: batches sent, and how many held one item. */
export async function batchSizes(url: string, stage: string): Promise<{ batches: number; single: number; items: number }> {
  const text = (await send(`${url}/metrics`)).text;
  // A stage that has sent no batch yet has no series.
  const value = (pattern: RegExp) => Number(text.match(pattern)?.[1] ?? 0);
  return {
    batches: value(new RegExp(`^shoal_stage_batch_size_count\\{stage="${stage}"\\} (\\S+)$`, "m")),
    single: value(new RegExp(`^shoal_stage_batch_size_bucket\\{le="1",stage="${stage}"\\} (\\S+)$`, "m")),
    items: value(new RegExp(`^shoal_stage_batch_size_sum\\{stage="${stage}"\\} (\\S+)$`, "m")),
  };
}
