import { randomUUID } from "node:crypto";
import type { HttpRequest, HttpResponse } from "../../http/http-message.js";
import { z } from "zod";
import { ShoalError } from "../../errors.js";
import { parseJsonBody } from "../../codecs.js";
import type { TextChunk, TextRequest, TokenLogprob } from "../../text-generation.js";
import { sendFailure, sendJson } from "../../http/send.js";
import type { Dialect, DialectRequest } from "../../http/dialect.js";
import type { Delegate, Inference } from "../../http/intake.js";
import { EmbeddingsDialect } from "./embeddings-dialect.js";
import { badRequest, openAIError } from "./openai-error.js";
import { servedSteps, type ServedModel } from "./served-model.js";

export type { ServedModel } from "./served-model.js";

/** The OpenAI API's two generation endpoints. */
type Endpoint = "completions" | "chat";

const stop = z.union([z.string(), z.array(z.string()).max(4)]).optional();
const common = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  /** vLLM's extension: 0 or -1 for all tokens. */
  top_k: z.number().int().min(-1).nullish(),
  n: z.literal(1).nullish(),
  stop: stop.nullable(),
  seed: z.number().int().nullish(),
  ignore_eos: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
};
// The log-probabilities of the tokens sampled are given; the runner-up tokens' are not.
const NO_ALTERNATIVES = "only 0: the log-probabilities of the tokens generated are given, not those of other tokens";
const CompletionBody = z.object({ ...common, prompt: z.union([z.string(), z.array(z.string()).length(1)]), logprobs: z.literal(0, NO_ALTERNATIVES).nullish() });
const ChatBody = z.object({
  ...common,
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.literal(0, NO_ALTERNATIVES).nullish(),
  messages: z
    .array(
      z.object({
        role: z.enum(["system", "user", "assistant", "tool", "developer"]),
        content: z.union([z.string(), z.array(z.object({ type: z.literal("text"), text: z.string() }))]),
      }),
    )
    .min(1),
});

/**
 * The OpenAI-compatible API under `/v1`: `GET /v1/models`, `POST /v1/completions` and
 * `POST /v1/chat/completions`, each model served by a route whose Worker generates text by the
 * {@link TextRequest} / {@link TextChunk} contract, and `POST /v1/embeddings` for the embedding
 * models (embeddings-dialect.ts). Requests are checked here and answered in OpenAI's shapes
 * (errors included); streams are Server-Sent Events ending with `[DONE]`. The `model` field
 * chooses the route, so bodies are read on the HTTP thread: none larger than `maxBytes`
 * (`--max-openai-size`) is parsed, whether a request's or a Worker's answer.
 */
export class OpenAIHandler implements Delegate {
  readonly prefix = "/v1";
  readonly #created = Math.floor(Date.now() / 1000);

  constructor(
    /** Each model's name and the steps of the route that serves it. */
    readonly models: ReadonlyMap<string, ServedModel>,
    /** The most bytes of a body (a request's, a Worker's answer or chunk) parsed on the HTTP thread. */
    readonly maxBytes: number,
  ) {}

  handle(req: HttpRequest, res: HttpResponse, path: string, requestId: string): Inference | undefined {
    const endpoint: Endpoint | undefined = path === "/v1/completions" ? "completions" : path === "/v1/chat/completions" ? "chat" : undefined;
    // The dialect names the steps once it has read the body's `model`.
    if (endpoint !== undefined) return { path, steps: [], dialect: new OpenAIDialect(endpoint, this.models, this.maxBytes) };
    if (path === "/v1/embeddings") return { path, steps: [], dialect: new EmbeddingsDialect(this.models, this.maxBytes) };
    if (path !== "/v1/models") {
      // As OpenAI answers a path it does not have: no code.
      sendJson(res, requestId, 404, openAIError(new ShoalError("NOT_FOUND", `${req.method} ${path}`), null));
      return;
    }
    if (req.method === "GET" || req.method === "HEAD") {
      sendJson(res, requestId, 200, { object: "list", data: [...this.models.keys()].map((id) => ({ id, object: "model", created: this.#created, owned_by: "shoal" })) });
      return;
    }
    sendFailure(res, requestId, new ShoalError("METHOD_NOT_ALLOWED", `${req.method} ${path}; use GET`), OPENAI_ERRORS, { allow: "GET, HEAD" });
  }
}

/** Errors in OpenAI's shape, for answers made without a request's dialect (an unknown path, a method not allowed). */
const OPENAI_ERRORS: Dialect = { error: (error) => openAIError(error) };

/** One OpenAI request: reads its body into a {@link TextRequest}, and shapes each chunk, its answer and its errors as OpenAI does. */
class OpenAIDialect implements Dialect {
  readonly #id: string;
  readonly #created = Math.floor(Date.now() / 1000);
  #model = "";
  #includeUsage = false;
  #usage: TextChunk["usage"];
  #first = true;
  /** Characters of the completion before the next token whose log-probability is given. */
  #offset = 0;

  constructor(
    readonly endpoint: Endpoint,
    readonly models: ReadonlyMap<string, ServedModel>,
    readonly maxBytes: number,
  ) {
    this.#id = `${endpoint === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`;
  }

  read(body: Uint8Array): DialectRequest {
    const json = parseJsonBody(body);
    const parsed = (this.endpoint === "chat" ? ChatBody : CompletionBody).safeParse(json);
    if (!parsed.success) throw badRequest(parsed.error);
    const r = parsed.data;
    const steps = servedSteps(this.models, r.model, "text");
    this.#model = r.model;
    this.#includeUsage = r.stream_options?.include_usage === true;
    const request: TextRequest = {};
    if ("messages" in r) {
      request.messages = r.messages.map((m) => ({ role: m.role, content: typeof m.content === "string" ? m.content : m.content.map((part) => part.text).join("") }));
      if (r.max_completion_tokens != null) request.max_tokens = r.max_completion_tokens;
    } else {
      request.prompt = typeof r.prompt === "string" ? r.prompt : r.prompt[0]!;
    }
    request.max_tokens ??= r.max_tokens ?? undefined;
    if (r.temperature != null) request.temperature = r.temperature;
    if (r.top_p != null) request.top_p = r.top_p;
    if (r.top_k != null && r.top_k > 0) request.top_k = r.top_k;
    if (r.logprobs === true || r.logprobs === 0) request.logprobs = true;
    if (r.stop != null) request.stop = typeof r.stop === "string" ? [r.stop] : r.stop;
    if (r.seed != null) request.seed = r.seed;
    if (r.ignore_eos != null) request.ignore_eos = r.ignore_eos;
    return { payload: Buffer.from(JSON.stringify(request)), stream: r.stream === true, steps };
  }

  chunk(bytes: Uint8Array): Uint8Array {
    const chunk = parseChunks(bytes)[0]!;
    if (chunk.usage !== undefined) this.#usage = chunk.usage;
    const finish = chunk.finish_reason ?? null;
    const logprobs = this.#logprobs(chunk.logprobs);
    let choice: Record<string, unknown>;
    if (this.endpoint === "chat") {
      choice = { index: 0, delta: this.#first ? { role: "assistant", content: chunk.text } : { content: chunk.text }, logprobs, finish_reason: finish };
    } else {
      choice = { index: 0, text: chunk.text, logprobs, finish_reason: finish };
    }
    this.#first = false;
    return Buffer.from(JSON.stringify(this.#envelope(this.endpoint === "chat" ? "chat.completion.chunk" : "text_completion", [choice])));
  }

  finish(): string[] {
    const events: string[] = [];
    if (this.#includeUsage) {
      const usage = usageOf(this.#usage);
      events.push(JSON.stringify({ ...this.#envelope(this.endpoint === "chat" ? "chat.completion.chunk" : "text_completion", []), usage }));
    }
    events.push("[DONE]");
    return events;
  }

  answer(body: Uint8Array): Uint8Array {
    const chunks = parseChunks(body);
    const text = chunks.map((c) => c.text).join("");
    const last = chunks.at(-1);
    const finish = last?.finish_reason ?? "stop";
    const logprobs = this.#logprobs(chunks.some((c) => c.logprobs !== undefined) ? chunks.flatMap((c) => c.logprobs ?? []) : undefined);
    const choice = this.endpoint === "chat" ? { index: 0, message: { role: "assistant", content: text }, logprobs, finish_reason: finish } : { index: 0, text, logprobs, finish_reason: finish };
    const usage = usageOf(chunks.findLast((c) => c.usage !== undefined)?.usage);
    return Buffer.from(JSON.stringify({ ...this.#envelope(this.endpoint === "chat" ? "chat.completion" : "text_completion", [choice]), usage }));
  }

  error(error: ShoalError): unknown {
    return openAIError(error);
  }

  // Tokens' log-probabilities in each endpoint's shape: chat's list of tokens, or the completions'
  // parallel lists, whose text offsets count from the start of the completion.
  #logprobs(tokens: TokenLogprob[] | undefined): unknown {
    if (tokens === undefined) return null;
    if (this.endpoint === "chat") return { content: tokens.map((t) => ({ token: t.token, logprob: t.logprob, bytes: [...Buffer.from(t.token)], top_logprobs: [] })), refusal: null };
    const offsets = tokens.map((t) => ((this.#offset += t.token.length), this.#offset - t.token.length));
    return { tokens: tokens.map((t) => t.token), token_logprobs: tokens.map((t) => t.logprob), top_logprobs: null, text_offset: offsets };
  }

  #envelope(object: string, choices: unknown[]): Record<string, unknown> {
    return { id: this.#id, object, created: this.#created, model: this.#model, choices };
  }
}

// What the Worker encoded: one chunk, or the gathered array of them.
function parseChunks(bytes: Uint8Array): TextChunk[] {
  const value = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8")) as TextChunk | TextChunk[];
  return Array.isArray(value) ? value : [value];
}

function usageOf(usage: TextChunk["usage"]): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const prompt = usage?.prompt_tokens ?? 0;
  const completion = usage?.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
