/**
 * A small typed helper for the OpenAI-compatible routes under `/v1` (`client.openai`): models,
 * completions and chat completions, whole or streamed. For the whole API, point the `openai`
 * package at the server instead (docs/client.md).
 */
import { jsonBody, type CallOptions, type HttpTransport } from "./http-transport.js";
import { jsonChunks } from "./streams.js";

/** A chat message. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | (string & {});
  content: string;
}

/** The fields of a completion request the routes share; others are sent as given. */
interface GenerationRequest {
  model: string;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  [field: string]: unknown;
}

/** `POST /v1/completions`. */
export interface CompletionRequest extends GenerationRequest {
  prompt: string;
}

/** `POST /v1/chat/completions`. */
export interface ChatRequest extends GenerationRequest {
  messages: ChatMessage[];
}

/** Tokens counted by the server. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A completion, or one chunk of a streamed one (`text` holds the new text). */
export interface Completion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: string | null }[];
  usage?: Usage | null;
}

/** A chat completion. */
export interface ChatCompletion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; message: ChatMessage; finish_reason: string | null }[];
  usage?: Usage | null;
}

/** One chunk of a streamed chat completion. */
export interface ChatCompletionChunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; delta: Partial<ChatMessage>; finish_reason: string | null }[];
  usage?: Usage | null;
}

/** The OpenAI routes of a client. */
export class OpenAIRoutes {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  /** `GET /v1/models`: the models' ids. */
  async models(options?: CallOptions): Promise<string[]> {
    const { data } = await this.#http.json<{ data: { id: string }[] }>({ method: "GET", path: "/v1/models" }, options);
    return data.map((model) => model.id);
  }

  /** `POST /v1/completions`, whole. */
  completion(request: CompletionRequest, options?: CallOptions): Promise<Completion> {
    return this.#http.json({ method: "POST", path: "/v1/completions", ...jsonBody({ ...request, stream: false }) }, options);
  }

  /** `POST /v1/completions` streamed: each chunk as it comes, until `[DONE]`. */
  completionStream(request: CompletionRequest, options?: CallOptions): AsyncGenerator<Completion> {
    return this.#stream("/v1/completions", request, options);
  }

  /** `POST /v1/chat/completions`, whole. */
  chat(request: ChatRequest, options?: CallOptions): Promise<ChatCompletion> {
    return this.#http.json({ method: "POST", path: "/v1/chat/completions", ...jsonBody({ ...request, stream: false }) }, options);
  }

  /** `POST /v1/chat/completions` streamed: each chunk's delta as it comes, until `[DONE]`. */
  chatStream(request: ChatRequest, options?: CallOptions): AsyncGenerator<ChatCompletionChunk> {
    return this.#stream("/v1/chat/completions", request, options);
  }

  async *#stream<T>(path: string, request: GenerationRequest, options: CallOptions | undefined): AsyncGenerator<T> {
    const { body } = jsonBody({ ...request, stream: true });
    const response = await this.#http.send({ method: "POST", path, body, headers: { "content-type": "application/json", accept: "text/event-stream" } }, options);
    yield* jsonChunks<T>(response);
  }
}
