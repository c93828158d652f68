/**
 * Writes a tiny GPT-2-style model folder, fully offline: `model.onnx` (a decoder-only transformer
 * with a KV cache, random weights from a fixed seed), `tokenizer.json` and `tokenizer_config.json`
 * (a byte-level BPE trained here on a short built-in text) and `config.json`. The layout and the
 * model's input and output names are those of a Hugging Face Optimum export of a decoder-only
 * model, so examples/generate/tiny-gpt.ts runs a real exported folder the same way.
 *
 * The model is a stand-in: its weights are random, so it writes gibberish. It exists to exercise
 * tokenization, batched prefill, step-wise decoding with a KV cache and streaming, at a size
 * (about 4 MB) where a batched step costs much less than one step per sequence.
 *
 * As a script: `node --import tsx examples/generate/make-model.ts [dir]` (default `models/tiny-gpt`).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import onnxProto from "onnx-proto";
import { CORPUS, EOS, tokenizerJson, trainBpe } from "./bpe.js";
import { normal } from "./random.js";

const { onnx } = onnxProto;
const { FLOAT, INT64 } = onnx.TensorProto.DataType;

/** The sizes of the model; every field has a default. */
export interface TinyGptOptions {
  /** Width of the embeddings and of every layer (default 128). */
  hidden?: number;
  /** Attention heads; must divide `hidden` (default 4). */
  heads?: number;
  /**
   * Heads of keys and values, shared by groups of query heads as in grouped-query attention;
   * must divide `heads` (default 1: one for all, which makes the KV cache, the data a step reads
   * and writes per token, `heads` times smaller).
   */
  kvHeads?: number;
  /** Transformer blocks (default 4). */
  layers?: number;
  /** Tokens in the vocabulary, special token included: the BPE learns merges up to it (default 1024). */
  vocabSize?: number;
  /** Longest sequence, prompt and completion together (default 512). */
  maxPositions?: number;
  /**
   * One matrix for the token embeddings and the output projection, as GPT-2 (default false: with
   * random weights a tied head mostly repeats the last token).
   */
  tiedEmbeddings?: boolean;
  /** Seeds the weights: the same options write the same files (default 1). */
  seed?: number;
}

/** What was written. */
export interface TinyGptInfo {
  dir: string;
  vocabSize: number;
  eosTokenId: number;
  /** Size of model.onnx in bytes. */
  modelBytes: number;
}

/** Writes the model folder `dir` (created if missing) and says what it holds. */
export function makeTinyGpt(dir: string, options: TinyGptOptions = {}): TinyGptInfo {
  const { hidden = 128, heads = 4, kvHeads = 1, layers = 4, vocabSize = 1024, maxPositions = 512, tiedEmbeddings = false, seed = 1 } = options;
  if (hidden % heads !== 0) throw new RangeError(`hidden (${hidden}) must be a multiple of heads (${heads})`);
  if (heads % kvHeads !== 0) throw new RangeError(`heads (${heads}) must be a multiple of kvHeads (${kvHeads})`);
  if (vocabSize < 257) throw new RangeError(`vocabSize (${vocabSize}) must hold the 256 bytes and the end-of-text token`);
  mkdirSync(dir, { recursive: true });
  const { vocab, merges } = trainBpe(CORPUS, vocabSize - 1);
  const eosTokenId = vocab.length;
  const json = (file: string, value: unknown) => writeFileSync(join(dir, file), `${JSON.stringify(value, null, 2)}\n`);
  json("tokenizer.json", tokenizerJson(vocab, merges));
  json("tokenizer_config.json", {
    tokenizer_class: "GPT2Tokenizer",
    bos_token: EOS,
    eos_token: EOS,
    unk_token: EOS,
    model_max_length: maxPositions,
    add_prefix_space: false,
    clean_up_tokenization_spaces: false,
    chat_template:
      "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}",
  });
  json("config.json", {
    model_type: "gpt2",
    architectures: ["GPT2LMHeadModel"],
    vocab_size: eosTokenId + 1,
    n_positions: maxPositions,
    n_embd: hidden,
    n_layer: layers,
    n_head: heads,
    num_key_value_heads: kvHeads,
    n_inner: 4 * hidden,
    activation_function: "gelu",
    layer_norm_epsilon: 1e-5,
    bos_token_id: eosTokenId,
    eos_token_id: eosTokenId,
    tie_word_embeddings: tiedEmbeddings,
    use_cache: true,
  });
  const model = graph({ hidden, heads, kvHeads, layers, vocab: eosTokenId + 1, maxPositions, tiedEmbeddings, seed });
  writeFileSync(join(dir, "model.onnx"), model);
  return { dir, vocabSize: eosTokenId + 1, eosTokenId, modelBytes: model.byteLength };
}

interface GraphShape {
  hidden: number;
  heads: number;
  kvHeads: number;
  layers: number;
  vocab: number;
  maxPositions: number;
  tiedEmbeddings: boolean;
  seed: number;
}

/**
 * The ONNX graph (opset 17), GPT-2's architecture with pre-layer-norm blocks:
 *
 *   h = wte[input_ids] + wpe[position_ids]
 *   per block: h += Wo·attention(LN(h), past) ; h += W2·gelu(W1·LN(h))
 *   logits = LN(h)·wteᵀ
 *
 * Attention sees the past keys and values followed by the new ones (`present.{i}.*`); a query
 * may look at key slot j when j is not after its own slot (causal, counted in slots of
 * past + new) and `attention_mask[b, j]` is 1. Masked scores get -1e9 rather than -∞ so that a
 * padding query, which may see nothing, still gives finite numbers.
 */
function graph({ hidden, heads, kvHeads, layers, vocab, maxPositions, tiedEmbeddings, seed }: GraphShape): Uint8Array {
  const headDim = hidden / heads;
  const gaussian = normal(seed);
  const initializer: onnxProto.onnx.ITensorProto[] = [];
  const node: onnxProto.onnx.INodeProto[] = [];
  const floats = (name: string, dims: number[], fill: (i: number) => number) => {
    const values = Float32Array.from({ length: dims.reduce((a, b) => a * b, 1) }, (_, i) => fill(i));
    initializer.push(onnx.TensorProto.create({ name, dims, dataType: FLOAT, rawData: new Uint8Array(values.buffer) }));
    return name;
  };
  const random = (name: string, dims: number[], std: number) => floats(name, dims, () => gaussian() * std);
  const constant = (name: string, value: number) => floats(name, [], () => value);
  const ints = (name: string, values: number[], dims = [values.length]) => {
    initializer.push(onnx.TensorProto.create({ name, dims, dataType: INT64, rawData: new Uint8Array(BigInt64Array.from(values, BigInt).buffer) }));
    return name;
  };
  const attr = (name: string, value: number | number[]) =>
    Array.isArray(value) ? { name, type: onnx.AttributeProto.AttributeType.INTS, ints: value } : Number.isInteger(value) ? { name, type: onnx.AttributeProto.AttributeType.INT, i: value } : { name, type: onnx.AttributeProto.AttributeType.FLOAT, f: value };
  const op = (opType: string, input: string[], output: string, attributes: Record<string, number | number[]> = {}) => {
    node.push(onnx.NodeProto.create({ opType, input, output: [output], name: output, attribute: Object.entries(attributes).map(([k, v]) => attr(k, v)) }));
    return output;
  };
  const io = (name: string, elemType: number, dims: (number | string)[]) =>
    onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === "string" ? { dimParam: d } : { dimValue: d })) } } } });
  const layerNorm = (x: string, name: string) =>
    op("LayerNormalization", [x, floats(`${name}.weight`, [hidden], () => 1), floats(`${name}.bias`, [hidden], () => 0)], name, { axis: -1, epsilon: 1e-5 });
  // Random weights larger than GPT-2's initial ones (0.02), so that the blocks, not only the last
  // token's embedding, decide what comes next; output projections scaled down by depth as GPT-2's.
  const linear = (x: string, name: string, inputs: number, outputs: number, std = 0.1) =>
    op("Add", [op("MatMul", [x, random(`${name}.weight`, [inputs, outputs], std)], `${name}.mm`), floats(`${name}.bias`, [outputs], () => 0)], name);

  // Embeddings large enough that the logits spread, and sampling has something to choose from.
  const wte = random("wte", [vocab, hidden], 0.5);
  const wpe = random("wpe", [maxPositions, hidden], 0.02);
  let h = op("Add", [op("Gather", [wte, "input_ids"], "tokens"), op("Gather", [wpe, "position_ids"], "positions")], "embedded");

  // The additive mask [batch, 1, new, past + new], shared by every block.
  const zero = ints("zero", [0], []);
  const one = ints("one", [1], []);
  const newLength = op("Gather", [op("Shape", ["input_ids"], "ids_shape"), one], "new_length");
  const totalLength = op("Gather", [op("Shape", ["attention_mask"], "mask_shape"), one], "total_length");
  const pastLength = op("Sub", [totalLength, newLength], "past_length");
  const keySlots = op("Unsqueeze", [op("Range", [zero, totalLength, one], "key_slots"), ints("axis0", [0])], "key_row");
  const axis1 = ints("axis1", [1]);
  const querySlots = op("Unsqueeze", [op("Range", [pastLength, totalLength, one], "query_slots"), axis1], "query_column");
  const causal = op("LessOrEqual", [keySlots, querySlots], "causal");
  const padding = op("Cast", [op("Unsqueeze", ["attention_mask", ints("axes12", [1, 2])], "mask4d")], "mask_bool", { to: onnx.TensorProto.DataType.BOOL });
  const allowed = op("And", [causal, padding], "allowed");
  const bias = op("Where", [allowed, constant("no_bias", 0), constant("masked_bias", -1e9)], "attention_bias");

  const group = heads / kvHeads;
  const scale = constant("scale", 1 / Math.sqrt(headDim));
  const queryHeads = ints("query_heads", [0, 0, heads, headDim]);
  const kvHeadsShape = ints("kv_heads", [0, 0, kvHeads, headDim]);
  // [batch, new, hidden] → [batch, heads, new, headDim]
  const toHeads = (x: string, name: string, shape: string) => op("Transpose", [op("Reshape", [x, shape], `${name}.split`)], `${name}.heads`, { perm: [0, 2, 1, 3] });
  // Attention in groups: queries [batch, kvHeads, group, new, headDim] against keys and values
  // [batch, kvHeads, 1, total, headDim], broadcast over the group.
  const groupQueries = ints("group_queries", [0, kvHeads, group, -1, headDim]);
  const ungroup = ints("ungroup", [0, heads, -1, headDim]);
  const mergeHeads = ints("merge_heads", [0, 0, hidden]);
  const axis2 = ints("axis2", [2]);
  const groupBias = op("Unsqueeze", [bias, axis1], "attention_bias_grouped");
  const sqrtHalf = constant("sqrt_half", Math.SQRT1_2);
  const half = constant("half", 0.5);
  const unit = constant("unit", 1);
  for (let i = 0; i < layers; i++) {
    const p = `h.${i}`;
    const x = layerNorm(h, `${p}.ln_1`);
    const q = op("Reshape", [toHeads(linear(x, `${p}.attn.q`, hidden, hidden), `${p}.q`, queryHeads), groupQueries], `${p}.q.grouped`);
    const k = toHeads(linear(x, `${p}.attn.k`, hidden, kvHeads * headDim), `${p}.k`, kvHeadsShape);
    const v = toHeads(linear(x, `${p}.attn.v`, hidden, kvHeads * headDim), `${p}.v`, kvHeadsShape);
    const keys = op("Unsqueeze", [op("Concat", [`past_key_values.${i}.key`, k], `present.${i}.key`, { axis: 2 }), axis2], `${p}.keys`);
    const values = op("Unsqueeze", [op("Concat", [`past_key_values.${i}.value`, v], `present.${i}.value`, { axis: 2 }), axis2], `${p}.values`);
    const scores = op("Mul", [op("MatMul", [q, op("Transpose", [keys], `${p}.keys_t`, { perm: [0, 1, 2, 4, 3] })], `${p}.qk`), scale], `${p}.scores`);
    const weights = op("Softmax", [op("Add", [scores, groupBias], `${p}.masked`)], `${p}.weights`, { axis: -1 });
    const attended = op("Reshape", [op("MatMul", [weights, values], `${p}.attended`), ungroup], `${p}.ungrouped`);
    const merged = op("Reshape", [op("Transpose", [attended], `${p}.attended_t`, { perm: [0, 2, 1, 3] }), mergeHeads], `${p}.merged`);
    h = op("Add", [h, linear(merged, `${p}.attn.out`, hidden, hidden, 0.1 / Math.sqrt(2 * layers))], `${p}.after_attn`);
    const y = linear(layerNorm(h, `${p}.ln_2`), `${p}.mlp.fc`, hidden, 4 * hidden);
    // gelu(y) = y/2 · (1 + erf(y/√2)); Gelu itself is an operator only from opset 20.
    const erf = op("Erf", [op("Mul", [y, sqrtHalf], `${p}.mlp.scaled`)], `${p}.mlp.erf`);
    const gelu = op("Mul", [op("Mul", [y, half], `${p}.mlp.half`), op("Add", [erf, unit], `${p}.mlp.erf1`)], `${p}.mlp.gelu`);
    h = op("Add", [h, linear(gelu, `${p}.mlp.proj`, 4 * hidden, hidden, 0.1 / Math.sqrt(2 * layers))], `${p}.out`);
  }
  const head = tiedEmbeddings ? op("Transpose", [wte], "lm_head", { perm: [1, 0] }) : random("lm_head", [hidden, vocab], 0.2);
  // A bias against the tokens of single bytes that are not printable ASCII (token b is byte b),
  // so that the gibberish is made of words and letters rather than of bytes that are no text.
  const logitBias = floats("lm_head.bias", [vocab], (id) => (id < 256 && !(id >= 32 && id <= 126) && id !== 10 ? -5 : 0));
  op("Add", [op("MatMul", [layerNorm(h, "ln_f"), head], "lm_head.mm"), logitBias], "logits");

  const cache = (prefix: string, length: string) =>
    Array.from({ length: layers }, (_, i) => ["key", "value"].map((kind) => io(`${prefix}.${i}.${kind}`, FLOAT, ["batch_size", kvHeads, length, headDim]))).flat();
  const proto = onnx.ModelProto.create({
    irVersion: 8,
    producerName: "shoal-example",
    opsetImport: [{ domain: "", version: 17 }],
    graph: {
      name: "tiny-gpt",
      node,
      initializer,
      input: [
        io("input_ids", INT64, ["batch_size", "sequence_length"]),
        io("attention_mask", INT64, ["batch_size", "total_length"]),
        io("position_ids", INT64, ["batch_size", "sequence_length"]),
        ...cache("past_key_values", "past_length"),
      ],
      output: [io("logits", FLOAT, ["batch_size", "sequence_length", vocab]), ...cache("present", "total_length")],
    },
  });
  return onnx.ModelProto.encode(proto).finish();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = resolve(process.argv[2] ?? "models/tiny-gpt");
  const info = makeTinyGpt(dir);
  process.stdout.write(`${info.dir}: model.onnx ${(info.modelBytes / 1e6).toFixed(1)} MB, vocabulary ${info.vocabSize}, end of text ${info.eosTokenId}\n`);
}
