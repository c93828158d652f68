/**
 * Step-wise text generation with a decoder-only ONNX model that keeps a KV cache, for continuous
 * batching: `begin()` reads new prompts (one batched prefill), `step()` makes one token for any
 * set of live sequences in one run of the model, whatever their lengths, so sequences can join
 * and leave between two steps.
 *
 * The model folder is the layout of a Hugging Face Optimum export of a decoder-only model
 * (`optimum-cli export onnx --task text-generation-with-past`): `model.onnx` with inputs
 * `input_ids`, `attention_mask`, `position_ids` (optional) and `past_key_values.{i}.key|value`,
 * outputs `logits` and `present.{i}.key|value`; `tokenizer.json` (+ `tokenizer_config.json`),
 * read by the tokenizer classes of @huggingface/transformers; `config.json`. make-model.ts writes
 * a tiny random one. Nothing is downloaded.
 *
 * Each sequence owns its cache. A step pads every sequence's past on the left to the longest past
 * in the step and masks the padding, so that a sequence gets the same tokens alone as in any
 * batch (up to float rounding, which differs with the batch's shape).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { StopStrings, ValidationError, incremental, type Detokenizer } from "shoal";
import { mulberry32 } from "./random.js";
import { sample } from "./sampling.js";

export type { Detokenizer } from "shoal";

/** Why a sequence ended, as OpenAI reports it: `stop` (end of text or a stop string) or `length`. */
export type FinishReason = "stop" | "length";

/** How one sequence is sampled and when it ends. */
export interface GenerateOptions {
  /** Most tokens to generate (default 16); the sequence also ends when the model's context is full. */
  maxTokens?: number;
  /** 0 picks the most likely token (greedy, the default); above 0 samples from softmax(logits / temperature). */
  temperature?: number;
  /** Samples only among the most likely tokens whose probabilities add up to `topP` (0 < topP ≤ 1, default 1). */
  topP?: number;
  /** Ends the sequence when its text contains one of these; the text returned stops before it. */
  stop?: string[];
  /** Seeds the sequence's random numbers; the same seed and prompt give the same tokens (default: random). */
  seed?: number;
  /** Goes on past the end-of-text token, so that only `maxTokens` (or a stop string) ends it: for benchmarks that need known lengths. */
  ignoreEos?: boolean;
}

/** One step's output for one sequence. */
export interface StepResult {
  /** The token generated (the end-of-text token too). */
  token: number;
  /** Text that is now final: the pieces of a sequence concatenate to its whole completion. May be "". */
  text: string;
  /** Whether the sequence has ended; it must not be stepped again. */
  done: boolean;
  finishReason?: FinishReason;
}

/** A sequence being generated: made by `begin()`, advanced by `step()`. */
export interface Sequence {
  /** Tokens of the prompt, as OpenAI's `usage.prompt_tokens` counts them. */
  readonly promptTokens: number;
  /** Tokens generated so far (`usage.completion_tokens`), the end-of-text token included. */
  readonly completionTokens: number;
  /** The tokens generated so far. */
  readonly tokens: readonly number[];
  /** The text returned so far by `step()`. */
  readonly text: string;
  readonly done: boolean;
  readonly finishReason: FinishReason | undefined;
}

/** A chat message, as OpenAI's chat completions take them. */
export interface ChatMessage {
  role: string;
  content: string;
}

/** The model's sizes, read from the ONNX file and config.json. */
export interface ModelInfo {
  layers: number;
  /** Heads of the KV cache (fewer than the attention heads in models with grouped-query attention). */
  kvHeads: number;
  headDim: number;
  /** Longest sequence, prompt and completion together. */
  maxPositions: number;
  /** Tokens that end a sequence. */
  eosTokenIds: number[];
  /** Tokens of the tokenizer, special ones included. */
  vocabSize: number;
}

export interface LoadOptions {
  /** Threads of ONNX Runtime's operators (default 1: run more workers rather than more threads). */
  threads?: number;
  /**
   * Most logits one run reading prompts may make, batch × longest prompt × vocabulary (default
   * 64 Mi floats, 256 MB): `begin()` reads bigger batches of prompts in several runs.
   */
  maxPrefillLogits?: number;
}

/** A loaded model. Calls that share a sequence must not overlap. */
export interface TextGenerator {
  readonly info: ModelInfo;
  tokenize(text: string): number[];
  detokenize(tokens: readonly number[]): string;
  detokenizer(): Detokenizer;
  /** The prompt for a chat: the tokenizer's chat template, or `role: content` lines when it has none. */
  chatPrompt(messages: readonly ChatMessage[]): number[];
  /**
   * Starts a sequence per prompt, reading all prompts in one run of the model (the last token of
   * each is read by its first step). `options` applies to all, or is one per prompt.
   * An empty prompt starts from the beginning-of-text token.
   */
  begin(prompts: readonly (readonly number[])[], options?: GenerateOptions | readonly GenerateOptions[]): Promise<Sequence[]>;
  /** Generates one token for each sequence, in one run of the model; results in the order given. */
  step(sequences: readonly Sequence[]): Promise<StepResult[]>;
  /** Frees the ONNX Runtime session. */
  close(): Promise<void>;
}

/** Loads the model folder `dir`: the ONNX model, its tokenizer and config.json. */
export async function load(dir: string, options: LoadOptions = {}): Promise<TextGenerator> {
  // Imported here: modules that only name the types stay cheap to import.
  const ort = await import("onnxruntime-node");
  const file = ["model.onnx", "onnx/model.onnx", "decoder_model_merged.onnx"].map((f) => join(dir, f)).find((f) => existsSync(f));
  if (file === undefined) throw new Error(`${dir} has no model.onnx (nor onnx/model.onnx, decoder_model_merged.onnx)`);
  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: options.threads ?? 1, interOpNumThreads: 1, graphOptimizationLevel: "all", logSeverityLevel: 3 });
  const tokenizer = await loadTokenizer(dir);
  const config = readJson(join(dir, "config.json")) as Record<string, unknown>;
  return new Generator(ort, session, tokenizer, modelInfo(session, config, tokenizer, dir), options.maxPrefillLogits ?? 64 * 2 ** 20);
}

type Ort = typeof import("onnxruntime-node");

// The tokenizer class that tokenizer_config.json names, built from the folder's files only.
async function loadTokenizer(dir: string): Promise<PreTrainedTokenizer> {
  const transformers = await import("@huggingface/transformers");
  const json = readJson(join(dir, "tokenizer.json"));
  const config = (existsSync(join(dir, "tokenizer_config.json")) ? readJson(join(dir, "tokenizer_config.json")) : {}) as Record<string, unknown>;
  const template = join(dir, "chat_template.jinja");
  if (config.chat_template === undefined && existsSync(template)) config.chat_template = readFileSync(template, "utf8");
  const name = String(config.tokenizer_class ?? "").replace(/Fast$/, "");
  const named = (transformers as Record<string, unknown>)[name];
  const Class = typeof named === "function" && named.prototype instanceof transformers.PreTrainedTokenizer ? (named as typeof transformers.PreTrainedTokenizer) : transformers.PreTrainedTokenizer;
  return new Class(json, config);
}

function readJson(file: string): unknown {
  return JSON.parse(readFileSync(file, "utf8"));
}

// Sizes from the ONNX inputs where they are fixed numbers, else from config.json.
function modelInfo(session: InferenceSession, config: Record<string, unknown>, tokenizer: PreTrainedTokenizer, dir: string): ModelInfo {
  const layers = session.inputNames.filter((n) => /^past_key_values\.\d+\.key$/.test(n)).length;
  const past = session.inputMetadata.find((m) => m.name === "past_key_values.0.key");
  if (layers === 0 || past === undefined || !past.isTensor) throw new Error(`${dir}: the model has no past_key_values.{i}.key inputs; export it with --task text-generation-with-past`);
  if (past.type !== "float32") throw new Error(`${dir}: the KV cache is ${past.type}; only float32 models are supported`);
  const number = (...keys: string[]) => keys.map((k) => config[k]).find((v): v is number => typeof v === "number");
  const heads = number("num_attention_heads", "n_head");
  const hidden = number("hidden_size", "n_embd");
  const fixed = (d: number | string | undefined) => (typeof d === "number" && d > 0 ? d : undefined);
  const kvHeads = fixed(past.shape[1]) ?? number("num_key_value_heads") ?? heads;
  const headDim = fixed(past.shape[3]) ?? number("head_dim") ?? (hidden !== undefined && heads !== undefined ? hidden / heads : undefined);
  if (kvHeads === undefined || headDim === undefined) throw new Error(`${dir}: config.json gives neither the heads nor the head size`);
  const eos = new Set<number>();
  const addEos = (value: unknown) => [value].flat().forEach((id) => typeof id === "number" && eos.add(id));
  addEos(config.eos_token_id);
  if (existsSync(join(dir, "generation_config.json"))) addEos((readJson(join(dir, "generation_config.json")) as Record<string, unknown>).eos_token_id);
  addEos(tokenizer.eos_token_id);
  return { layers, kvHeads, headDim, maxPositions: number("n_positions", "max_position_embeddings") ?? Number.MAX_SAFE_INTEGER, eosTokenIds: [...eos], vocabSize: tokenizer.get_vocab().size };
}

/** A sequence's state, hidden behind the read-only interface. */
class State implements Sequence {
  readonly tokens: number[] = [];
  text = "";
  done = false;
  finishReason: FinishReason | undefined;
  /** Tokens in the cache. */
  length = 0;
  /** The next token to feed: the prompt's last, then each one sampled. */
  next: number;
  /** Per layer, keys then values, each [kvHeads, capacity, headDim]. */
  cache: Float32Array[] = [];
  capacity = 0;
  busy = false;
  readonly maxTokens: number;
  readonly ignoreEos: boolean;
  readonly temperature: number;
  readonly topP: number;
  readonly stops: StopStrings;
  readonly random: () => number;

  constructor(
    readonly owner: Generator,
    readonly promptTokens: number,
    last: number,
    readonly detokenizer: Detokenizer,
    options: GenerateOptions,
  ) {
    const { maxTokens = 16, temperature = 0, topP = 1, stop = [], seed = Math.floor(Math.random() * 2 ** 32) } = options;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new ValidationError(`maxTokens must be a positive integer, not ${maxTokens}`);
    if (!(temperature >= 0 && Number.isFinite(temperature))) throw new ValidationError(`temperature must be 0 or more, not ${temperature}`);
    if (!(topP > 0 && topP <= 1)) throw new ValidationError(`topP must be above 0 and at most 1, not ${topP}`);
    if (stop.some((s) => typeof s !== "string" || s === "")) throw new ValidationError("stop strings must be non-empty strings");
    this.maxTokens = maxTokens;
    this.ignoreEos = options.ignoreEos === true;
    this.temperature = temperature;
    this.topP = topP;
    this.stops = new StopStrings([...stop]);
    this.random = mulberry32(seed);
    this.next = last;
  }

  get completionTokens(): number {
    return this.tokens.length;
  }
}

class Generator implements TextGenerator {
  readonly #eos: Set<number>;
  readonly #inputs: Set<string>;
  readonly #buffers = new Map<string, Float32Array>();
  #queue: Promise<unknown> = Promise.resolve();
  /** Which of the two buffers of each key or value the last run wrote its presents to. */
  #side = 0;
  /** The sequences of the last run, when it was a step: its presents are their caches, padded. */
  #last: State[] | undefined;

  constructor(
    readonly ort: Ort,
    readonly session: InferenceSession,
    readonly tokenizer: PreTrainedTokenizer,
    readonly info: ModelInfo,
    readonly maxPrefillLogits: number,
  ) {
    this.#eos = new Set(info.eosTokenIds);
    this.#inputs = new Set(session.inputNames);
  }

  tokenize(text: string): number[] {
    return this.tokenizer.encode(text);
  }

  detokenize(tokens: readonly number[]): string {
    // The tokenizer refuses an empty list. No clean-up of spaces before punctuation: it would make
    // a window of tokens decode differently from the whole text, and streamed pieces not add up.
    return tokens.length === 0 ? "" : this.tokenizer.decode([...tokens], { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }

  detokenizer(): Detokenizer {
    return incremental((tokens) => this.detokenize(tokens));
  }

  chatPrompt(messages: readonly ChatMessage[]): number[] {
    if (this.tokenizer.chat_template == null) return this.tokenize(`${messages.map((m) => `${m.role}: ${m.content}\n`).join("")}assistant:`);
    return this.tokenizer.apply_chat_template(messages as ChatMessage[], { add_generation_prompt: true, tokenize: true, return_tensor: false, return_dict: false }) as number[];
  }

  async begin(prompts: readonly (readonly number[])[], options: GenerateOptions | readonly GenerateOptions[] = {}): Promise<Sequence[]> {
    if (Array.isArray(options) && options.length !== prompts.length) throw new ValidationError(`${prompts.length} prompts but ${options.length} options`);
    const start = this.tokenizer.bos_token_id ?? this.info.eosTokenIds[0];
    const vocab = this.info.vocabSize;
    const full = prompts.map((prompt) => {
      const ids = prompt.length === 0 && start !== undefined ? [start] : [...prompt];
      if (ids.length === 0) throw new ValidationError("the prompt is empty and the model has no beginning-of-text token");
      if (ids.length > this.info.maxPositions) throw new ValidationError(`the prompt has ${ids.length} tokens; the model reads at most ${this.info.maxPositions}`);
      if (ids.some((id) => !Number.isInteger(id) || id < 0 || id >= vocab)) throw new ValidationError(`prompt tokens must be integers from 0 to ${vocab - 1}`);
      return ids;
    });
    const states = full.map((ids, i) => new State(this, ids.length, ids.at(-1)!, this.detokenizer(), (Array.isArray(options) ? options[i] : options) as GenerateOptions));
    const reading = states.flatMap((state, i) => (full[i]!.length > 1 ? [{ state, ids: full[i]!.slice(0, -1) }] : []));
    // The model makes logits for every position read, [batch, width, vocabulary]: prompts are
    // read in groups small enough that these stay within `maxPrefillLogits`.
    for (let from = 0; from < reading.length; ) {
      let to = from + 1;
      for (let width = reading[from]!.ids.length; to < reading.length; to++) {
        width = Math.max(width, reading[to]!.ids.length);
        if ((to + 1 - from) * width * vocab > this.maxPrefillLogits) break;
      }
      await this.#prefill(reading.slice(from, to));
      from = to;
    }
    return states;
  }

  // Reads all tokens but the last of several prompts in one run: padded on the left to the
  // longest, the padding masked; each prompt's keys and values go to its own cache.
  async #prefill(prompts: { state: State; ids: number[] }[]): Promise<void> {
    const batch = prompts.length;
    const width = Math.max(...prompts.map((p) => p.ids.length));
    const ids = new BigInt64Array(batch * width);
    const mask = new BigInt64Array(batch * width);
    // Padding's positions do not matter; 1 is what Hugging Face gives them.
    const positions = new BigInt64Array(batch * width).fill(1n);
    prompts.forEach(({ ids: prompt }, b) => {
      const pad = width - prompt.length;
      prompt.forEach((id, j) => {
        ids[b * width + pad + j] = BigInt(id);
        mask[b * width + pad + j] = 1n;
        positions[b * width + pad + j] = BigInt(j);
      });
    });
    const { kvHeads, headDim } = this.info;
    await this.#run(batch, width, ids, mask, positions, 0, () => {}, (presents) => {
      prompts.forEach(({ state, ids: prompt }, b) => {
        reserve(state, prompt.length, this.info);
        state.cache.forEach((cache, c) => {
          for (let h = 0; h < kvHeads; h++) {
            const from = ((b * kvHeads + h) * width + width - prompt.length) * headDim;
            cache.set(presents[c]!.subarray(from, from + prompt.length * headDim), h * state.capacity * headDim);
          }
        });
        state.length = prompt.length;
      });
    });
  }

  async step(sequences: readonly Sequence[]): Promise<StepResult[]> {
    const states = sequences.map((s) => {
      if (!(s instanceof State) || s.owner !== this) throw new TypeError("step() takes sequences that this model's begin() made");
      if (s.done) throw new TypeError("a sequence that has ended cannot be stepped");
      if (s.busy) throw new TypeError("a sequence is stepped twice at once");
      return s;
    });
    if (states.length === 0) return [];
    states.forEach((s) => (s.busy = true));
    try {
      return await this.#step(states);
    } finally {
      states.forEach((s) => (s.busy = false));
    }
  }

  async #step(states: State[]): Promise<StepResult[]> {
    const batch = states.length;
    const { kvHeads, headDim, maxPositions } = this.info;
    const past = Math.max(...states.map((s) => s.length));
    const total = past + 1;
    const ids = BigInt64Array.from(states, (s) => BigInt(s.next));
    const positions = BigInt64Array.from(states, (s) => BigInt(s.length));
    const mask = new BigInt64Array(batch * total);
    states.forEach((s, b) => mask.fill(1n, b * total + past - s.length, (b + 1) * total));
    // Each past, padded on the left to the longest: [batch, kvHeads, past, headDim]. What the
    // padding holds does not matter: its attention weights are exactly 0. When the same
    // sequences were stepped last, the last run's presents are this run's past, already there.
    const fillPast = (c: number, data: Float32Array) => {
      if (this.#sameAsLast(states)) return;
      states.forEach((s, b) => {
        for (let h = 0; h < kvHeads && s.length > 0; h++) {
          const from = h * s.capacity * headDim;
          data.set(s.cache[c]!.subarray(from, from + s.length * headDim), ((b * kvHeads + h) * past + past - s.length) * headDim);
        }
      });
    };
    const tokens = await this.#run(batch, 1, ids, mask, positions, past, fillPast, (presents, logits) => {
      this.#last = states;
      const vocab = logits.length / batch;
      return states.map((s, b) => {
        // The new token's keys and values are the last slot of each present.
        reserve(s, s.length + 1, this.info);
        s.cache.forEach((cache, c) => {
          for (let h = 0; h < kvHeads; h++) {
            const from = ((b * kvHeads + h) * total + past) * headDim;
            cache.set(presents[c]!.subarray(from, from + headDim), (h * s.capacity + s.length) * headDim);
          }
        });
        s.length++;
        return sample(logits.subarray(b * vocab, (b + 1) * vocab), s.temperature, s.topP, s.random);
      });
    });
    return states.map((s, b) => this.#accept(s, tokens[b]!, s.length >= maxPositions));
  }

  /**
   * Runs the model once, then hands `use` the presents (layer by layer, keys then values) and the
   * logits; `use` must copy what it keeps. Runs go one at a time, so that the buffers of the KV
   * cache, the biggest inputs and outputs, are allocated once and reused: two per key or value
   * of each layer, one the past and the other the present, swapped at each run, so that a run's
   * presents are in place to be the next run's past.
   */
  #run<T>(
    batch: number,
    width: number,
    ids: BigInt64Array,
    mask: BigInt64Array,
    positions: BigInt64Array,
    past: number,
    fillPast: (c: number, data: Float32Array) => void,
    use: (presents: Float32Array[], logits: Float32Array) => T,
  ): Promise<T> {
    const run = async () => {
      const { Tensor } = this.ort;
      const { layers, kvHeads, headDim } = this.info;
      const feeds: Record<string, Tensor> = {
        input_ids: new Tensor("int64", ids, [batch, width]),
        attention_mask: new Tensor("int64", mask, [batch, past + width]),
      };
      if (this.#inputs.has("position_ids")) feeds.position_ids = new Tensor("int64", positions, [batch, width]);
      if (this.#inputs.has("use_cache_branch")) feeds.use_cache_branch = new Tensor("bool", Uint8Array.of(past > 0 ? 1 : 0), [1]);
      const fetches: Record<string, Tensor | null> = { logits: null };
      const presents: Float32Array[] = [];
      const side = (this.#side ^= 1);
      for (let c = 0; c < 2 * layers; c++) {
        const name = `${Math.floor(c / 2)}.${c % 2 === 0 ? "key" : "value"}`;
        const input = this.#buffer(`${c}.${side ^ 1}`, batch * kvHeads * past * headDim);
        fillPast(c, input);
        feeds[`past_key_values.${name}`] = new Tensor("float32", input, [batch, kvHeads, past, headDim]);
        presents.push(this.#buffer(`${c}.${side}`, batch * kvHeads * (past + width) * headDim));
        fetches[`present.${name}`] = new Tensor("float32", presents[c]!, [batch, kvHeads, past + width, headDim]);
      }
      this.#last = undefined;
      const out = await this.session.run(feeds, fetches);
      return use(presents, out.logits!.data as Float32Array);
    };
    const result = this.#queue.then(run);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  // A view of `size` floats on a buffer kept for the next runs. One grown keeps its content (it
  // may hold the last presents).
  #buffer(name: string, size: number): Float32Array {
    let buffer = this.#buffers.get(name);
    if (buffer === undefined || buffer.length < size) {
      const grown = new Float32Array(Math.max(size, 2 * (buffer?.length ?? 0)));
      if (buffer !== undefined) grown.set(buffer);
      this.#buffers.set(name, (buffer = grown));
    }
    return buffer.subarray(0, size);
  }

  // Whether `states` are the sequences of the last run, in the same order.
  #sameAsLast(states: State[]): boolean {
    const last = this.#last;
    return last !== undefined && last.length === states.length && last.every((s, i) => s === states[i]);
  }

  // Takes a sampled token into the sequence: its text, with stop strings and the ends applied.
  #accept(s: State, token: number, contextFull: boolean): StepResult {
    s.tokens.push(token);
    s.next = token;
    const eos = !s.ignoreEos && this.#eos.has(token);
    const ending: FinishReason | undefined = eos ? "stop" : s.tokens.length >= s.maxTokens || contextFull ? "length" : undefined;
    let piece = eos ? "" : s.detokenizer.push(token);
    if (ending !== undefined) piece += s.detokenizer.flush();
    const { text, stopped } = s.stops.push(piece, ending !== undefined);
    const reason = stopped ? "stop" : ending;
    s.text += text;
    if (reason === undefined) return { token, text, done: false };
    s.done = true;
    s.finishReason = reason;
    s.cache = []; // the memory is not needed any more
    return { token, text, done: true, finishReason: reason };
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}

// Makes room in a sequence's cache for `length` tokens, doubling it as it grows.
function reserve(s: State, length: number, { layers, kvHeads, headDim }: ModelInfo): void {
  if (length <= s.capacity) return;
  const capacity = Math.max(length, 2 * s.capacity, 16);
  s.cache = Array.from({ length: 2 * layers }, (_, c) => {
    const grown = new Float32Array(kvHeads * capacity * headDim);
    const old = s.cache[c];
    for (let h = 0; old !== undefined && h < kvHeads; h++) grown.set(old.subarray(h * s.capacity * headDim, (h * s.capacity + s.length) * headDim), h * capacity * headDim);
    return grown;
  });
  s.capacity = capacity;
}
