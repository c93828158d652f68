/**
 * The model repository's `"llama"` runtime: a `.gguf` file served by {@link LlamaWorker} as a V2
 * model, a prompt in and its text out, streamed on `/generate_stream` and `/infer_stream`.
 */
import { z } from "zod";
import { ClientError } from "../errors.js";
import { TextRequest, type TextChunk } from "../text-generation.js";
import { checkDeclaredInputs } from "../v2/declared.js";
import type { TensorMetadata, V2InferenceRequest, V2Tensor } from "../v2/types.js";
import type { LlamaOptions } from "./llama-worker.js";

/** The model's one input: the prompt, one UTF-8 text. */
export const TEXT_INPUT: TensorMetadata = { name: "text_input", datatype: "BYTES", shape: [1] };
/** Its one output: the text generated (each response of a stream, the next piece). */
export const TEXT_OUTPUT: TensorMetadata = { name: "text_output", datatype: "BYTES", shape: [1] };

/** The settings' `parameters` of a llama model: {@link LlamaOptions}, `sequences` by default the model's `maxBatchSize`. */
const LlamaParameters = z.strictObject({
  sequences: z.number().int().min(1).optional(),
  contextSize: z.number().int().min(16).optional(),
  threads: z.number().int().min(1).optional(),
  batchSize: z.number().int().min(1).optional(),
});

/** The worker options of a llama model, from its settings' `parameters`; throws naming the parameter at fault. */
export function llamaOptions(parameters: Record<string, unknown>, maxBatchSize: number): LlamaOptions {
  const parsed = LlamaParameters.safeParse(parameters);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`parameters${issue.path.length > 0 ? `.${issue.path.join(".")}` : ""}: ${issue.message} (a llama model takes sequences, contextSize, threads and batchSize)`);
  }
  // Every request of a batch holds a sequence.
  const sequences = Math.max(parsed.data.sequences ?? maxBatchSize, maxBatchSize);
  return { ...parsed.data, sequences };
}

// The request's parameters that are sampling settings, by their TextRequest names.
const SAMPLING = ["max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "ignore_eos"] as const;
const decoder = new TextDecoder("utf-8", { fatal: true });

/** A V2 request as the Worker takes it: `text_input` the prompt, the sampling settings from `parameters`. */
export function textRequestOf(request: V2InferenceRequest): TextRequest {
  checkDeclaredInputs(request.inputs, [TEXT_INPUT]);
  const input = request.inputs.find((t) => t.name === TEXT_INPUT.name);
  if (input === undefined) throw new ClientError(`the model takes input '${TEXT_INPUT.name}' (BYTES [1]), the prompt`);
  let prompt: string;
  try {
    prompt = decoder.decode((input.data as Uint8Array[])[0]);
  } catch {
    throw new ClientError(`input '${TEXT_INPUT.name}' is not UTF-8 text`);
  }
  const given = request.parameters ?? {};
  const settings = Object.fromEntries(SAMPLING.filter((k) => given[k] !== undefined).map((k) => [k, k === "stop" && typeof given[k] === "string" ? [given[k]] : given[k]]));
  const parsed = TextRequest.safeParse({ prompt, ...settings });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ClientError(`parameters.${issue.path.join(".")}: ${issue.message}`);
  }
  return parsed.data;
}

const encoder = new TextEncoder();

/** One chunk of the Worker's stream as the model's output tensors. */
export function textTensorsOf(chunk: TextChunk): V2Tensor[] {
  return [{ ...TEXT_OUTPUT, data: [encoder.encode(chunk.text)] }];
}
