/**
 * The contract between Shoal's text-generation APIs (the OpenAI-compatible routes) and a Worker
 * that generates text: what one request is, and what each chunk of its stream is. A Worker typed
 * with these schemas (`typed(TextRequest, TextChunk)`, or a {@link StepWorker} reading the same
 * shape) serves `/v1/completions` and `/v1/chat/completions` (see `Server.openAI()`).
 */
import { z } from "zod";

/** One message of a chat. */
export const ChatMessage = z.object({
  role: z.enum(["system", "user", "assistant", "tool", "developer"]),
  content: z.string(),
});

/** One text-generation request: a prompt, or the messages of a chat for the Worker's own chat template. */
export const TextRequest = z
  .object({
    prompt: z.string().optional(),
    messages: z.array(ChatMessage).min(1).optional(),
    /** The most tokens to generate. */
    max_tokens: z.number().int().min(1).optional(),
    /** 0 for greedy decoding. */
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    /** Samples only among the `top_k` most likely tokens. */
    top_k: z.number().int().min(1).optional(),
    /** Strings that end the generation (not included in the text). */
    stop: z.array(z.string()).max(4).optional(),
    seed: z.number().int().optional(),
    /** Generate past the end-of-text token until `max_tokens` (vLLM's extension): for benchmarks that need known lengths. */
    ignore_eos: z.boolean().optional(),
    /** Give each generated token's log-probability in the chunks, when the Worker can. */
    logprobs: z.boolean().optional(),
  })
  .refine((r) => (r.prompt === undefined) !== (r.messages === undefined), { message: "give either prompt or messages" });

/** One generated token's text and the natural logarithm of the probability it was sampled with. */
export const TokenLogprob = z.object({ token: z.string(), logprob: z.number() });

/** One chunk of a generation's stream: new text, and on the last chunk why it ended and the token counts. */
export const TextChunk = z.object({
  text: z.string(),
  finish_reason: z.enum(["stop", "length"]).optional(),
  usage: z.object({ prompt_tokens: z.number().int().min(0), completion_tokens: z.number().int().min(0) }).optional(),
  /** When the request asked for `logprobs`: the tokens generated since the last chunk, each with its text and natural log-probability. */
  logprobs: z.array(TokenLogprob).optional(),
});

export type ChatMessage = z.infer<typeof ChatMessage>;
export type TextRequest = z.infer<typeof TextRequest>;
export type TextChunk = z.infer<typeof TextChunk>;
export type TokenLogprob = z.infer<typeof TokenLogprob>;
