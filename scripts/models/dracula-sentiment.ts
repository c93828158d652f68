/**
 * Converts dracula-sentiment (npm, BSD-3-Clause), a character-level BiLSTM sentiment model whose
 * weights ship as JavaScript literals, into ONNX: one graph that takes a batch of texts of any
 * number of words (ragged: each text's own count in `word_lens`) and gives [negative, neutral,
 * positive] probabilities, equal to the package's own `score()` to float32 rounding.
 *
 * What the package computes, and the graph repeats:
 * 1. Words are the text split on " ", empty ones dropped; each is cut to 20 UTF-16 code units,
 *    each unit mapped through `char_dict` (unknown units to row 0), padded with a zero row.
 * 2. A character BiLSTM (hidden 32) runs over all 20 steps. Its backward states are summed with
 *    the forward ones in the order they were computed, so position t gets fw[t] + bw[19 - t].
 * 3. Mean, max and min over the word's real characters: 96 values per word.
 * 4. A word BiLSTM (hidden 96) over the words, then the mean of its outputs over words, a dense
 *    layer and a softmax.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { runInNewContext } from "node:vm";
import { MAX_CHARS, type DraculaVocabulary } from "./dracula-inputs.js";
import { GraphBuilder } from "./onnx-graph.js";


type Matrix = number[][];

/** The package's weights, read from its `dracula.params.js` (assignments of array literals). */
export function draculaParams(file = draculaParamsFile()): Record<string, unknown> {
  const context: Record<string, unknown> = {};
  // The file is literals only; a context of its own gives it nothing else to reach.
  runInNewContext(readFileSync(file, "utf8"), context, { filename: file });
  const params: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context)) if (key.startsWith("draculaParams_")) params[key.slice("draculaParams_".length)] = value;
  return params;
}

/** Where the installed package keeps its weights. */
export function draculaParamsFile(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve("dracula-sentiment/package.json")), "dracula.params.js");
}

// Theano's gates are i, f, o, c in columns of W [in, 4h]; ONNX wants i, o, f, c in rows [4h, in].
const GATES = [0, 2, 1, 3];

function lstmMatrix(m: Matrix, h: number): number[] {
  const out: number[] = [];
  for (const g of GATES) for (let j = 0; j < h; j++) for (let r = 0; r < m.length; r++) out.push(m[r]![g * h + j]!);
  return out;
}

function lstmBias(b: number[], h: number): number[] {
  return GATES.flatMap((g) => b.slice(g * h, (g + 1) * h));
}

/** The model as ONNX bytes, and its vocabulary. */
export function convertDracula(params = draculaParams()): { model: Uint8Array; vocabulary: DraculaVocabulary } {
  const p = params as Record<string, Matrix> & { b: number[]; char_dict: Record<string, number> };
  const D = MAX_CHARS;
  const E = p.Cemb![0]!.length;
  const H1 = p.lstm_chars_1_forwards_U!.length;
  const H2 = p.lstm_words_1_forwards_U!.length;
  const PAD = p.Cemb!.length;
  const g = new GraphBuilder();
  for (const [prefix, h] of [["lstm_chars_1", H1], ["lstm_words_1", H2]] as const) {
    const w = (dir: string, m: string) => lstmMatrix(p[`${prefix}_${dir}_${m}`]!, h);
    const b = (dir: string) => lstmBias(p[`${prefix}_${dir}_b`] as unknown as number[], h);
    const zeros = new Array<number>(4 * h).fill(0);
    const inDim = p[`${prefix}_forwards_W`]!.length;
    g.f32(`${prefix}_W`, [2, 4 * h, inDim], [...w("forwards", "W"), ...w("backwards", "W")]);
    g.f32(`${prefix}_R`, [2, 4 * h, h], [...w("forwards", "U"), ...w("backwards", "U")]);
    // Theano's LSTM has one bias per gate; ONNX's second (recurrent) bias stays zero.
    g.f32(`${prefix}_B`, [2, 8 * h], [...b("forwards"), ...zeros, ...b("backwards"), ...zeros]);
  }
  g.f32("Cemb", [PAD + 1, E], [...p.Cemb!.flat(), ...new Array<number>(E).fill(0)]);
  g.f32("U", [H2, 3], p.U!.flat());
  g.f32("b", [3], p.b);
  g.i64("pad", [], [PAD]);
  g.i64("ax0", [1], [0]);
  g.i64("ax1", [1], [1]);
  g.i64("shape_bw_d_e", [3], [-1, D, E]);
  g.i64("shape_bw_d_1", [3], [-1, D, 1]);
  g.f32("one", [], [1]);
  g.f32("big", [], [1e30]);
  g.f32("negbig", [], [-1e30]);
  g.f32("zero", [], [0]);

  // Characters: [batch, words, 20] ids → one 20-step sequence per word.
  g.node("Shape", ["char_ids"], ["ids_shape"]);
  g.i64("idx01", [2], [0, 1]);
  g.node("Gather", ["ids_shape", "idx01"], ["bw_dims"]);
  g.node("Gather", ["Cemb", "char_ids"], ["emb"]);
  g.node("Reshape", ["emb", "shape_bw_d_e"], ["emb2"]);
  g.node("Transpose", ["emb2"], ["x1"], { perm: [1, 0, 2] });
  g.node("LSTM", ["x1", "lstm_chars_1_W", "lstm_chars_1_R", "lstm_chars_1_B"], ["y1"], { hidden_size: H1, direction: "bidirectional" });
  g.node("Split", ["y1"], ["y1f", "y1b"], { axis: 1 });
  g.node("Squeeze", ["y1f", "ax1"], ["yf"]);
  g.node("Squeeze", ["y1b", "ax1"], ["yb"]);
  g.i64("rs", [1], [-1]);
  g.i64("re", [1], [-Number.MAX_SAFE_INTEGER]);
  g.i64("rstep", [1], [-1]);
  g.node("Slice", ["yb", "rs", "re", "ax0", "rstep"], ["ybr"]);
  g.node("Add", ["yf", "ybr"], ["y1s"]);
  g.node("Transpose", ["y1s"], ["h1"], { perm: [1, 0, 2] });

  // Pooling over each word's real characters: mean, max, min (padding masked out).
  g.node("Equal", ["char_ids", "pad"], ["is_pad"]);
  g.node("Not", ["is_pad"], ["valid"]);
  g.node("Cast", ["valid"], ["maskf"], { to: 1 });
  g.node("Reshape", ["maskf", "shape_bw_d_1"], ["m"]);
  g.node("ReduceSum", ["m", "ax1"], ["cnt"], { keepdims: 0 });
  g.node("Max", ["cnt", "one"], ["cnt1"]);
  g.node("Mul", ["h1", "m"], ["hm"]);
  g.node("ReduceSum", ["hm", "ax1"], ["hsum"], { keepdims: 0 });
  g.node("Div", ["hsum", "cnt1"], ["hmean"]);
  g.node("Sub", ["one", "m"], ["inv"]);
  g.node("Mul", ["inv", "negbig"], ["negpad"]);
  g.node("Mul", ["inv", "big"], ["pospad"]);
  g.node("Add", ["h1", "negpad"], ["hmx"]);
  g.node("ReduceMax", ["hmx"], ["hmax"], { axes: [1], keepdims: 0 });
  g.node("Add", ["h1", "pospad"], ["hmn"]);
  g.node("ReduceMin", ["hmn"], ["hmin"], { axes: [1], keepdims: 0 });
  g.node("Concat", ["hmean", "hmax", "hmin"], ["pooled0"], { axis: 1 });
  // A padding word (past a shorter text's end in a ragged batch) pools to zeros, not ±1e30.
  g.node("Greater", ["cnt", "zero"], ["wvalid"]);
  g.node("Where", ["wvalid", "pooled0", "zero"], ["pooled"]);

  // Words: each text's own number of them (sequence_lens), then the mean over those.
  g.i64("c96", [1], [3 * H1]);
  g.node("Concat", ["bw_dims", "c96"], ["shape_b_w_96"], { axis: 0 });
  g.node("Reshape", ["pooled", "shape_b_w_96"], ["p3"]);
  g.node("Transpose", ["p3"], ["x2"], { perm: [1, 0, 2] });
  g.node("LSTM", ["x2", "lstm_words_1_W", "lstm_words_1_R", "lstm_words_1_B", "word_lens"], ["y2"], { hidden_size: H2, direction: "bidirectional" });
  g.node("ReduceSum", ["y2", "ax1"], ["y2s"], { keepdims: 0 });
  g.node("ReduceSum", ["y2s", "ax0"], ["y2t"], { keepdims: 0 });
  g.node("Cast", ["word_lens"], ["wl_f"], { to: 1 });
  g.node("Unsqueeze", ["wl_f", "ax1"], ["wl2"]);
  g.node("Div", ["y2t", "wl2"], ["final"]);
  g.node("MatMul", ["final", "U"], ["lg0"]);
  g.node("Add", ["lg0", "b"], ["logits"]);
  g.node("Softmax", ["logits"], ["probs"], { axis: -1 });

  const model = g.encode({
    name: "dracula",
    producer: "shoal-models",
    doc: "dracula-sentiment 1.1.1 (BSD-3-Clause, Theano Development Team, Richard Townsend) converted to ONNX",
    inputs: [["char_ids", "int64", ["batch", "words", D]], ["word_lens", "int32", ["batch"]]],
    outputs: [["probs", "float32", ["batch", 3]]],
  });
  const vocabulary: DraculaVocabulary = { chars: p.char_dict, unknown: 0, pad: PAD, maxChars: D, labels: ["negative", "neutral", "positive"] };
  return { model, vocabulary };
}
