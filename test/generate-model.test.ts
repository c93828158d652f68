/**
 * The generative example's model side (examples/generate/): the tiny GPT-style model written
 * offline, and the runtime that reads prompts in batches and steps any set of sequences one
 * token at a time. What continuous batching relies on is checked here: a sequence gets the same
 * tokens alone, in a batch with sequences of other lengths, or joining a batch already running.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as ort from "onnxruntime-node";
import { ValidationError } from "shoal";
import { makeTinyGpt } from "../examples/generate/make-model.js";
import { load, type GenerateOptions, type Sequence, type StepResult, type TextGenerator } from "../examples/generate/tiny-gpt.js";

/** Steps the sequences together until all have ended, each leaving as it ends; returns each one's results. */
async function run(model: TextGenerator, sequences: Sequence[]): Promise<StepResult[][]> {
  const results: StepResult[][] = sequences.map(() => []);
  for (let live = sequences.map((_, i) => i); live.length > 0; live = live.filter((i) => !sequences[i]!.done)) {
    const step = await model.step(live.map((i) => sequences[i]!));
    live.forEach((i, j) => results[i]!.push(step[j]!));
  }
  return results;
}

/** The tokens a prompt gets alone. */
async function alone(model: TextGenerator, prompt: number[], options: GenerateOptions): Promise<number[]> {
  const [sequence] = await model.begin([prompt], options);
  await run(model, [sequence!]);
  return [...sequence!.tokens];
}

describe("the tiny GPT example model", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-tiny-gpt-"));
  const modelDir = join(dir, "tiny-gpt");
  let model: TextGenerator;
  // Prompts of different lengths: 1, 2, 5, 9, 17 tokens or so.
  const texts = ["a", "The fish", "Hello from Shoal, said the", "One, two, three, four, five, six, seven", "Once upon a time there was a small fish who wanted to see the whole ocean and"];
  let prompts: number[][];

  before(async () => {
    makeTinyGpt(modelDir);
    model = await load(modelDir);
    prompts = texts.map((t) => model.tokenize(t));
  });
  after(async () => {
    await model?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("is written offline, a few MB, the same for the same seed, with a config and tokenizer that agree", () => {
    const bytes = statSync(join(modelDir, "model.onnx")).size;
    assert.ok(bytes > 1e6 && bytes < 8e6, `model.onnx is ${bytes} bytes`);
    const again = makeTinyGpt(join(dir, "again"));
    assert.deepEqual(readFileSync(join(dir, "again", "model.onnx")), readFileSync(join(modelDir, "model.onnx")));
    const config = JSON.parse(readFileSync(join(modelDir, "config.json"), "utf8"));
    const vocab = JSON.parse(readFileSync(join(modelDir, "tokenizer.json"), "utf8")).model.vocab;
    assert.equal(config.vocab_size, Object.keys(vocab).length);
    assert.equal(config.eos_token_id, again.eosTokenId);
    assert.deepEqual(model.info, { layers: config.n_layer, kvHeads: config.num_key_value_heads, headDim: config.n_embd / config.n_head, maxPositions: config.n_positions, eosTokenIds: [config.eos_token_id], vocabSize: config.vocab_size });
    assert.notDeepEqual(makeTinyGpt(join(dir, "other"), { seed: 2 }).modelBytes, 0);
    assert.notDeepEqual(readFileSync(join(dir, "other", "model.onnx")), readFileSync(join(modelDir, "model.onnx")));
  });

  test("tokenizes with merges learned from its text, and detokenizes back, special tokens skipped", () => {
    for (const text of ["Hello from Shoal. The fish swim!", "naïve café, 日本語 and 🐟\n\ttabs"]) {
      const ids = model.tokenize(text);
      assert.equal(model.detokenize(ids), text);
      assert.equal(model.detokenize([...ids, model.info.eosTokenIds[0]!]), text);
    }
    assert.ok(model.tokenize("the fish").length <= 2, "common words are single tokens");
    assert.equal(model.detokenize([]), "");
    assert.deepEqual(model.chatPrompt([{ role: "user", content: "hi" }]), model.tokenize("user: hi\nassistant:"));
  });

  test("pieces of an incremental detokenizer concatenate to the whole text and never split a character", () => {
    const text = "naïve café 日本語 🐟🐠 fish";
    const ids = model.tokenize(text);
    assert.ok(ids.length > [...text].length, "some characters take several tokens");
    const detokenizer = model.detokenizer();
    const pieces = ids.map((id) => detokenizer.push(id));
    pieces.push(detokenizer.flush());
    assert.equal(pieces.join(""), text);
    assert.ok(!pieces.some((p) => p.includes("\uFFFD")), JSON.stringify(pieces));
    assert.ok(pieces.includes(""), "a partial character waits for the next token");
  });

  test("greedy decoding with the KV cache makes the tokens that running the whole sequence again at each step makes", async () => {
    const prompt = prompts[2]!;
    const tokens = await alone(model, prompt, { maxTokens: 12 });
    assert.equal(tokens.length, 12);
    assert.deepEqual(await alone(model, prompt, { maxTokens: 12 }), tokens, "deterministic");
    assert.notDeepEqual(await alone(model, prompts[3]!, { maxTokens: 12 }), tokens, "another prompt, other tokens");
    // No cache: the whole sequence read at once, the last position's logits.
    const session = await ort.InferenceSession.create(join(modelDir, "model.onnx"));
    try {
      const { layers, kvHeads, headDim } = model.info;
      for (let t = 0; t < tokens.length; t++) {
        const ids = [...prompt, ...tokens.slice(0, t)];
        const n = ids.length;
        const feeds: Record<string, ort.Tensor> = {
          input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, n]),
          attention_mask: new ort.Tensor("int64", new BigInt64Array(n).fill(1n), [1, n]),
          position_ids: new ort.Tensor("int64", BigInt64Array.from(ids.keys(), BigInt), [1, n]),
        };
        for (let i = 0; i < layers; i++) for (const kind of ["key", "value"]) feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor("float32", new Float32Array(0), [1, kvHeads, 0, headDim]);
        const logits = (await session.run(feeds)).logits!;
        const vocab = logits.dims[2]!;
        const last = (logits.data as Float32Array).subarray((n - 1) * vocab, n * vocab);
        assert.equal(last.indexOf(Math.max(...last)), tokens[t], `token ${t}`);
      }
    } finally {
      await session.release();
    }
  });

  test("a batch of prompts of different lengths, stepped together, gets each prompt's tokens alone", async () => {
    const options = { maxTokens: 10 };
    const expected: number[][] = [];
    for (const prompt of prompts) expected.push(await alone(model, prompt, options));
    assert.deepEqual(new Set(prompts.map((p) => p.length)).size, prompts.length, "lengths differ");
    const sequences = await model.begin(prompts, options);
    const results = await run(model, sequences);
    sequences.forEach((s, i) => {
      assert.deepEqual(s.tokens, expected[i], texts[i]);
      assert.deepEqual(
        results[i]!.map((r) => r.token),
        expected[i],
      );
    });
    // Prompts read in several runs, two at most, when their logits would be too many for one.
    const longest = Math.max(...prompts.map((p) => p.length - 1));
    const split = await load(modelDir, { maxPrefillLogits: 2 * longest * model.info.vocabSize });
    try {
      const again = await split.begin(prompts, options);
      await run(split, again);
      assert.deepEqual(
        again.map((s) => s.tokens),
        expected,
      );
    } finally {
      await split.close();
    }
  });

  test("a sequence joining a running batch, and sequences stepped in any subset and order, get their tokens alone", async () => {
    const options = { maxTokens: 14 };
    const [a, b, c] = [prompts[4]!, prompts[0]!, prompts[1]!];
    const expected = [await alone(model, a, options), await alone(model, b, options), await alone(model, c, options)];
    const [first] = await model.begin([a], options);
    for (let i = 0; i < 5; i++) await model.step([first!]);
    const [second, third] = await model.begin([b, c], options);
    // Continuous batching: a different set of sequences at each step.
    const plan = [[first, second, third], [third, first], [second], [second, third, first], [first, third]];
    for (let i = 0; !(first!.done && second!.done && third!.done); i++) {
      await model.step(plan[i % plan.length]!.filter((s) => !s!.done) as Sequence[]);
    }
    assert.deepEqual([first!.tokens, second!.tokens, third!.tokens], expected);
  });

  test("sampling: the same seed gives the same tokens, alone or in a batch; another seed others; a tiny top_p is greedy", async () => {
    const prompt = prompts[3]!;
    const sampled = { maxTokens: 16, temperature: 1, seed: 11 };
    const tokens = await alone(model, prompt, sampled);
    const [s, other, greedyTopP] = await model.begin([prompt, prompt, prompt], [sampled, { ...sampled, seed: 12 }, { maxTokens: 16, temperature: 1, topP: 1e-9 }]);
    await run(model, [s!, other!, greedyTopP!]);
    assert.deepEqual(s!.tokens, tokens);
    assert.notDeepEqual(other!.tokens, tokens);
    assert.deepEqual(greedyTopP!.tokens, await alone(model, prompt, { maxTokens: 16 }));
    assert.notDeepEqual(tokens, greedyTopP!.tokens, "sampling at temperature 1 is not greedy");
  });

  test("max_tokens ends with finish_reason length; the pieces concatenate to the completion; tokens are counted", async () => {
    const prompt = prompts[2]!;
    const [s] = await model.begin([prompt], { maxTokens: 7 });
    const [results] = await run(model, [s!]);
    assert.equal(results!.length, 7);
    assert.deepEqual(
      results!.map((r) => r.done),
      [false, false, false, false, false, false, true],
    );
    assert.deepEqual(results!.at(-1), { token: s!.tokens.at(-1), text: results!.at(-1)!.text, done: true, finishReason: "length" });
    assert.equal(s!.finishReason, "length");
    assert.equal(results!.map((r) => r.text).join(""), model.detokenize(s!.tokens));
    assert.equal(s!.text, model.detokenize(s!.tokens));
    assert.equal(s!.promptTokens, prompt.length);
    assert.equal(s!.completionTokens, 7);
    const [empty] = await model.begin([[]], { maxTokens: 3 });
    await run(model, [empty!]);
    assert.equal(empty!.promptTokens, 1, "an empty prompt starts from the end-of-text token");
    assert.equal(empty!.completionTokens, 3);
    await assert.rejects(model.step([s!]), /ended/);
  });

  test("a stop string ends with finish_reason stop, the text cut before it, also across tokens; a near miss is let through", async () => {
    const prompt = prompts[1]!;
    const [free] = await model.begin([prompt], { maxTokens: 24 });
    const [pieces] = await run(model, [free!]);
    const full = free!.text;
    // A stop string that spans the text of two tokens.
    const k = pieces!.findIndex((p, i) => i > 2 && p.text.length >= 2 && (pieces![i + 1]?.text.length ?? 0) >= 2);
    assert.ok(k > 0, `two tokens of two characters or more in ${JSON.stringify(pieces)}`);
    const stop = pieces![k]!.text.slice(-2) + pieces![k + 1]!.text.slice(0, 2);
    const at = full.indexOf(stop);
    const [stopped, missed] = await model.begin([prompt, prompt], [
      { maxTokens: 24, stop: ["\u0007never", stop] },
      { maxTokens: 24, stop: [`${stop}\u0007`] },
    ]);
    const [stoppedPieces, missedPieces] = await run(model, [stopped!, missed!]);
    assert.equal(stopped!.finishReason, "stop");
    assert.equal(stopped!.text, full.slice(0, at));
    assert.equal(stoppedPieces!.map((p) => p.text).join(""), full.slice(0, at));
    assert.ok(stopped!.completionTokens < 24);
    assert.equal(missed!.finishReason, "length");
    assert.equal(missedPieces!.map((p) => p.text).join(""), full);
    // While the text may be the start of the stop string it is held back, then let through.
    assert.ok(missedPieces!.some((p, i) => p.text !== pieces![i]!.text));
  });

  test("the end-of-text token ends with finish_reason stop, counted but not in the text", async () => {
    // The same weights, with a token the model makes early declared the end of text.
    const prompt = prompts[3]!;
    const tokens = await alone(model, prompt, { maxTokens: 8 });
    const eosDir = join(dir, "eos");
    cpSync(modelDir, eosDir, { recursive: true });
    const config = JSON.parse(readFileSync(join(eosDir, "config.json"), "utf8"));
    writeFileSync(join(eosDir, "config.json"), JSON.stringify({ ...config, eos_token_id: tokens[4] }));
    const eosModel = await load(eosDir);
    try {
      const [s] = await eosModel.begin([prompt], { maxTokens: 8 });
      const [results] = await run(eosModel, [s!]);
      const end = tokens.indexOf(tokens[4]!);
      assert.deepEqual(s!.tokens, tokens.slice(0, end + 1));
      assert.deepEqual(results!.at(-1), { token: tokens[4], text: "", done: true, finishReason: "stop" });
      assert.equal(s!.text, model.detokenize(tokens.slice(0, end)));
      assert.equal(s!.completionTokens, end + 1);
    } finally {
      await eosModel.close();
    }
  });

  test("a full context ends with finish_reason length; bad prompts, options and calls are refused clearly", async () => {
    const small = join(dir, "small");
    makeTinyGpt(small, { layers: 1, maxPositions: 16 });
    const smallModel = await load(small);
    try {
      const prompt = smallModel.tokenize("One, two, three, four, five").slice(0, 10);
      assert.equal(prompt.length, 10);
      const [s] = await smallModel.begin([prompt], { maxTokens: 100 });
      await run(smallModel, [s!]);
      assert.equal(s!.finishReason, "length");
      assert.equal(s!.promptTokens + s!.completionTokens, 17, "every position used, and the last token made");
      await assert.rejects(smallModel.begin([new Array(17).fill(5)]), (err: Error) => err instanceof ValidationError && /at most 16/.test(err.message));
    } finally {
      await smallModel.close();
    }
    await assert.rejects(model.begin([[1, 1e6]]), ValidationError);
    await assert.rejects(model.begin([[1, 2]], { maxTokens: 0 }), /maxTokens must be a positive integer/);
    await assert.rejects(model.begin([[1, 2]], { temperature: -1 }), /temperature/);
    await assert.rejects(model.begin([[1, 2]], { topP: 0 }), /topP/);
    await assert.rejects(model.begin([[1, 2]], { stop: [""] }), /stop strings/);
    await assert.rejects(model.begin([[1], [2]], [{}]), /2 prompts but 1 options/);
    const [s] = await model.begin([[1, 2]]);
    await assert.rejects(model.step([{ ...s! }]), /begin\(\) made/);
    await assert.rejects(Promise.all([model.step([s!]), model.step([s!])]), /stepped twice at once/);
    assert.deepEqual(await model.step([]), []);
  });
});
