/**
 * The Worker that serves a GGUF language model with llama.cpp (node-llama-cpp), continuously
 * batched: each step decodes one token of every active sequence in one llama.cpp batch.
 */
import { basename } from "node:path";
import type { ChatHistoryItem, ChatWrapper, LlamaContext, LlamaContextSequence, LlamaModel, SequenceEvaluateOutput, Token, TokenBias } from "node-llama-cpp";
import { defaultIntraOpThreads } from "../onnx/onnx-worker.js";
import { ClientError } from "../errors.js";
import { StepWorker, type StepResult } from "../step-worker.js";
import { TextChunk, TextRequest, type ChatMessage, type TokenLogprob } from "../text-generation.js";
import { StopStrings, incremental, type Detokenizer } from "../text-stream.js";
import type { WorkerClass } from "../worker.js";

/** How each worker runs the model. */
export interface LlamaOptions {
  /**
   * Sequences each worker generates at once (default 8): the context holds a KV cache for each.
   * Give the stage the same `maxActive` (or less), since each active request holds one.
   */
  sequences?: number;
  /** Tokens of one sequence, prompt and completion (default 2048, at most the model's training context). */
  contextSize?: number;
  /** CPU threads of each worker (default: the machine's cores shared among the stage's `num` workers). */
  threads?: number;
  /** The most tokens one llama.cpp decode takes, prompts and steps together (default 512). */
  batchSize?: number;
}

/** Options of {@link llamaWorker}. */
export interface LlamaWorkerOptions extends LlamaOptions {
  /** Path of the `.gguf` file; a relative path is taken from the working directory. */
  model: string;
  /** The class's name, which names the stage (default: the file's name, e.g. `SmolLM2_135M_Instruct_Q4_1`). */
  name?: string;
}

/** One request being generated. */
export interface LlamaSequence {
  /** The context's sequence, whose KV cache this request holds until it leaves. */
  readonly sequence: LlamaContextSequence;
  readonly tokens: AsyncGenerator<SequenceEvaluateOutput<{ confidence: true }>, void, void | Token | Token[]>;
  readonly promptTokens: number;
  completionTokens: number;
  readonly maxTokens: number;
  readonly detokenizer: Detokenizer;
  readonly stops: StopStrings;
  /** Log-probabilities of the tokens not yet sent, when the request asked for them. */
  readonly logprobs: TokenLogprob[] | undefined;
}

/**
 * Serves a GGUF model by Shoal's text-generation contract ({@link TextRequest} in,
 * {@link TextChunk}s out), so that `Server.openAI()` serves it on `/v1/completions` and
 * `/v1/chat/completions`. Each worker loads the model in `init()` with llama.cpp's prebuilt CPU
 * binary (never downloading or building one) and makes one context of {@link LlamaOptions.sequences}
 * sequences. A request takes a sequence when it joins: its prompt (a chat's messages through the
 * chat template the GGUF file holds) is read in the next step, together with one token of every
 * other active sequence, and the sequence is freed when it leaves, finished or not.
 *
 * Sampling: `temperature` (0 is greedy; default 1, as OpenAI's), `top_p`, `top_k`, `seed` (the
 * same seed and prompt give the same text); a completion ends at the end-of-text token
 * (`finish_reason` `stop`), a `stop` string (`stop`, the string left out) or `max_tokens` or the
 * sequence's context (`length`).
 */
export class LlamaWorker extends StepWorker<TextRequest, LlamaSequence, TextChunk> {
  static override input = TextRequest;
  static override output = TextChunk;
  override example = { prompt: "Fish swim", max_tokens: 2, temperature: 0 };
  /** Path of the `.gguf` file. */
  model = "";
  options: LlamaOptions = {};
  #lib!: typeof import("node-llama-cpp");
  #model!: LlamaModel;
  #context!: LlamaContext;
  #chat!: ChatWrapper;

  override async init(): Promise<void> {
    // Imported here: the server's own thread loads this module too, and never computes.
    const lib = (this.#lib = await import("node-llama-cpp"));
    const threads = this.options.threads ?? defaultIntraOpThreads(this.num);
    // The prebuilt binary of the platform's package, or an error: never a download or a build.
    const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false, logLevel: lib.LlamaLogLevel.error, maxThreads: threads });
    this.#model = await llama.loadModel({ modelPath: this.model, gpuLayers: 0 });
    this.#context = await this.#model.createContext({
      sequences: this.options.sequences ?? 8,
      contextSize: Math.min(this.options.contextSize ?? 2048, this.#model.trainContextSize),
      threads,
      ...(this.options.batchSize === undefined ? {} : { batchSize: this.options.batchSize }),
    });
    // The Jinja template of the file itself, not a look-alike node-llama-cpp knows.
    this.#chat = lib.resolveChatWrapper(this.#model, { type: "jinjaTemplate" });
  }

  join(inputs: TextRequest[]): (LlamaSequence | Error)[] {
    return inputs.map((input) => {
      try {
        return this.#begin(input);
      } catch (err) {
        return err as Error;
      }
    });
  }

  #begin(r: TextRequest): LlamaSequence {
    const model = this.#model;
    const prompt = r.messages === undefined ? model.tokenize(r.prompt!, false) : this.#chatPrompt(r.messages);
    if (r.messages === undefined && model.tokens.shouldPrependBosToken && model.tokens.bos !== null) prompt.unshift(model.tokens.bos);
    const room = this.#context.contextSize - prompt.length;
    if (room < 1) throw new ClientError(`the prompt is ${prompt.length} tokens; this model's context holds ${this.#context.contextSize - 1} at most with a token to generate`);
    if (this.#context.sequencesLeft === 0) throw new Error(`all ${this.#context.totalSequences} sequences are taken: give the stage a maxActive no greater than 'sequences'`);
    const sequence = this.#context.getSequence();
    const eog = [model.tokens.eos, model.tokens.eot].filter((t): t is Token => t !== null);
    const tokens = sequence.evaluateWithMetadata(
      prompt,
      { confidence: true },
      {
        // OpenAI's default temperature is 1.
        temperature: r.temperature ?? 1,
        ...(r.top_p === undefined ? {} : { topP: r.top_p }),
        ...(r.top_k === undefined ? {} : { topK: r.top_k }),
        ...(r.seed === undefined ? {} : { seed: r.seed }),
        yieldEogToken: true,
        ...(r.ignore_eos === true ? { tokenBias: this.#never(eog) } : {}),
      },
    );
    return {
      sequence,
      tokens,
      promptTokens: prompt.length,
      completionTokens: 0,
      // OpenAI's default is 16 tokens; no sequence goes past its context.
      maxTokens: Math.min(r.max_tokens ?? 16, room),
      detokenizer: incremental((t) => model.detokenize(t as Token[])),
      stops: new StopStrings(r.stop ?? []),
      logprobs: r.logprobs === true ? [] : undefined,
    };
  }

  #chatPrompt(messages: ChatMessage[]): Token[] {
    const chatHistory: ChatHistoryItem[] = messages.map((m) => {
      if (m.role === "assistant") return { type: "model", response: [m.content] };
      return { type: m.role === "system" || m.role === "developer" ? "system" : "user", text: m.content };
    });
    // An empty answer of the model last: the template ends with the start of its turn.
    chatHistory.push({ type: "model", response: [] });
    return this.#chat.generateContextState({ chatHistory }).contextText.tokenize(this.#model.tokenizer);
  }

  // The bias that keeps the given tokens from being sampled (the end-of-text ones, for `ignore_eos`).
  #never(tokens: Token[]): TokenBias {
    const bias = new this.#lib.TokenBias(this.#model.tokenizer);
    for (const token of tokens) bias.set(token, "never");
    return bias;
  }

  // One token of each sequence: every sequence's evaluation is queued in this tick, and the
  // context decodes them all in one llama.cpp batch (a new sequence's prompt included).
  async step(active: LlamaSequence[]): Promise<StepResult<TextChunk>[]> {
    const outputs = await Promise.all(active.map((s) => s.tokens.next()));
    return outputs.map((output, i) => this.#advance(active[i]!, output.done === true ? undefined : output.value));
  }

  #advance(s: LlamaSequence, output: SequenceEvaluateOutput<{ confidence: true }> | undefined): StepResult<TextChunk> {
    const end = output === undefined || this.#model.isEogToken(output.token);
    let piece: string;
    if (end) {
      piece = s.detokenizer.flush();
    } else {
      s.completionTokens++;
      piece = s.detokenizer.push(output.token);
      s.logprobs?.push({ token: this.#model.detokenize([output.token]), logprob: Math.log(output.confidence) });
    }
    const length = !end && s.completionTokens >= s.maxTokens;
    const last = end || length;
    const { text, stopped } = s.stops.push(last && !end ? piece + s.detokenizer.flush() : piece, last);
    const logprobs = s.logprobs?.splice(0);
    const chunk: TextChunk = { text, ...(logprobs === undefined || logprobs.length === 0 ? {} : { logprobs }) };
    if (!last && !stopped) return text === "" && chunk.logprobs === undefined ? {} : { chunk };
    chunk.finish_reason = length && !stopped ? "length" : "stop";
    chunk.usage = { prompt_tokens: s.promptTokens, completion_tokens: s.completionTokens };
    return { chunk, done: true };
  }

  // Called between steps, when no evaluation of the sequence is under way: its KV cache is freed
  // and the sequence is free for the next request at once.
  override leave(s: LlamaSequence): void {
    void s.tokens.return();
    s.sequence.dispose();
  }
}

/**
 * A {@link LlamaWorker} class for one GGUF file, for `server.appendWorker()`:
 *
 * @example
 * ```ts
 * import { llamaWorker } from "shoal/llama";
 * const SmolLM = llamaWorker({ model: "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sequences: 16 });
 * server.appendWorker(SmolLM, { route: "/chat", maxActive: 16, isolation: "process" });
 * server.openAI({ model: "smollm2", route: "/chat" });
 * ```
 */
export function llamaWorker({ model, name, ...options }: LlamaWorkerOptions): WorkerClass {
  const cls = class extends LlamaWorker {
    override model = model;
    override options = options;
  };
  const fromFile = basename(model).replace(/\.gguf$/i, "").replace(/[^A-Za-z0-9_]/g, "_");
  Object.defineProperty(cls, "name", { value: name ?? (fromFile || "LlamaModel") });
  return cls;
}
