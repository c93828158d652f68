/**
 * The tiny decoder of this folder served as a StepWorker: requests join between decoding steps,
 * each step runs every active sequence in one batch, and each sequence streams its text as it
 * comes, by the TextRequest/TextChunk contract that Shoal's OpenAI-compatible routes speak.
 *
 * The model folder is `MODEL_DIR`; without it, a tiny random model is made once in the system's
 * temporary folder (it writes gibberish: see README.md for pointing it at a real exported model).
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StepWorker, TextChunk, TextRequest, type StepResult } from "shoal";
import type { GenerateOptions, Sequence, TextGenerator } from "./tiny-gpt.js";

export class TinyGpt extends StepWorker<TextRequest, Sequence, TextChunk> {
  static override input = TextRequest;
  static override output = TextChunk;
  override example = { prompt: "Fish swim", max_tokens: 2, temperature: 0 };
  #model!: TextGenerator;

  override async init(): Promise<void> {
    // Imported here, not at the top: the server's own thread loads this module too, and never computes.
    const { load } = await import("./tiny-gpt.js");
    this.#model = await load(process.env.MODEL_DIR ?? (await tinyModel()), { threads: 1 });
  }

  // The prompts of the requests that arrived since the last step, read in one batch; a request
  // the model refuses (a prompt too long, say) fails alone.
  async join(inputs: TextRequest[]): Promise<(Sequence | Error)[]> {
    const model = this.#model;
    const prompts = inputs.map((r) => (r.messages === undefined ? model.tokenize(r.prompt!) : model.chatPrompt(r.messages)));
    const options = inputs.map(optionsOf);
    try {
      return await model.begin(prompts, options);
    } catch {
      return Promise.all(prompts.map((prompt, i) => model.begin([prompt], options[i]).then(([seq]) => seq!, (err: Error) => err)));
    }
  }

  async step(active: Sequence[]): Promise<StepResult<TextChunk>[]> {
    const results = await this.#model.step(active);
    return results.map((r, i) => {
      if (!r.done) return r.text === "" ? {} : { chunk: { text: r.text } };
      const seq = active[i]!;
      return { chunk: { text: r.text, finish_reason: r.finishReason!, usage: { prompt_tokens: seq.promptTokens, completion_tokens: seq.completionTokens } }, done: true };
    });
  }
}

function optionsOf(r: TextRequest): GenerateOptions {
  // OpenAI's defaults: 16 tokens, temperature 1.
  return { maxTokens: r.max_tokens ?? 16, temperature: r.temperature ?? 1, topP: r.top_p ?? 1, stop: r.stop ?? [], ...(r.seed === undefined ? {} : { seed: r.seed }), ignoreEos: r.ignore_eos === true };
}

// The stand-in model, made on first use and kept: written aside, then moved into place, so that
// workers starting together never read half a folder.
async function tinyModel(): Promise<string> {
  const dir = join(tmpdir(), "shoal-tiny-gpt");
  if (existsSync(join(dir, "config.json"))) return dir;
  const { makeTinyGpt } = await import("./make-model.js");
  const scratch = mkdtempSync(join(tmpdir(), "shoal-tiny-gpt-"));
  makeTinyGpt(scratch);
  try {
    renameSync(scratch, dir);
  } catch {
    // Another worker moved its copy into place first.
    rmSync(scratch, { recursive: true, force: true });
  }
  return dir;
}
