/** Shared by the model repository tests: repositories written at test time, and servers over them. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { decodeInferenceResponse, encodeInferenceRequest, type V2InferenceRequest, type V2InferenceResponse } from "../src/v2/index.js";
import { makeEmbedding } from "./fixtures/make-embedding.js";
import { makeMlp, type MlpShape } from "./fixtures/make-mlp.js";
import { fixture, send, type Reply, type ServerProcess } from "./helpers.js";
import { serveCli } from "./onnx-helpers.js";

/** A model repository in a temporary folder; `remove()` deletes it. */
export class ModelRepo {
  readonly dir = mkdtempSync(join(tmpdir(), "shoal-models-"));

  constructor() {
    // The modules written in model folders are ES modules, as the fixtures they re-export.
    writeFileSync(join(this.dir, "package.json"), '{"type": "module"}\n');
  }

  /** Writes `<name>/model-settings.json`. */
  settings(name: string, settings: unknown): void {
    mkdirSync(join(this.dir, name), { recursive: true });
    writeFileSync(join(this.dir, name, "model-settings.json"), typeof settings === "string" ? settings : JSON.stringify(settings));
  }

  /** Writes an MLP as `<name>/<version>/model.onnx` (or `<name>/model.onnx` when version is ""). */
  mlp(name: string, version: string, shape: MlpShape): void {
    makeMlp(this.#onnxFile(name, version), shape);
  }

  /** Writes an embedding lookup (make-embedding.ts) as `<name>/<version>/model.onnx`, as {@link mlp} does. */
  embedding(name: string, version: string, rows: number, width: number): void {
    makeEmbedding(this.#onnxFile(name, version), rows, width);
  }

  #onnxFile(name: string, version: string): string {
    const dir = join(this.dir, name, version);
    mkdirSync(dir, { recursive: true });
    return join(dir, "model.onnx");
  }

  /**
   * A model whose runtime is a module of test/fixtures/models, re-exported by a file of the same
   * name in the model's folder (a runtime must be inside its model's folder).
   */
  module(name: string, file: string, settings: Record<string, unknown> = {}): void {
    mkdirSync(join(this.dir, name), { recursive: true });
    writeFileSync(join(this.dir, name, file), `export { default } from ${JSON.stringify(pathToFileURL(fixture(join("models", file))).href)};\n`);
    this.settings(name, { name, runtime: `./${file}`, ...settings });
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts `shoal serve --model-repository <dir> ...args` and resolves once it is ready. */
export function serveRepository(dir: string, args: string[] = [], env: Record<string, string> = {}): Promise<ServerProcess> {
  return serveCli(["--model-repository", dir], args, env, 60_000);
}

/** A V2 response, decoded whatever way it came. */
export interface Inferred {
  reply: Reply;
  response: V2InferenceResponse | undefined;
}

/**
 * Sends a V2 inference request (binary inputs as asked) and decodes the answer with the
 * response's `Inference-Header-Content-Length`.
 */
export async function infer(url: string, request: V2InferenceRequest, binaryInputs: boolean | string[] = false): Promise<Inferred> {
  const { body, headerLength, contentType } = encodeInferenceRequest(request, { binaryInputs });
  const headers: Record<string, string> = { "content-type": contentType };
  if (headerLength !== undefined) headers["inference-header-content-length"] = String(headerLength);
  const reply = await send(url, { method: "POST", body, headers });
  const length = reply.headers.get("inference-header-content-length") ?? undefined;
  return { reply, response: reply.status === 200 ? decodeInferenceResponse(reply.body, length) : undefined };
}

