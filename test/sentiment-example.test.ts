/**
 * examples/sentiment/server.ts: the dracula-sentiment model (npm run models) served on
 * POST /sentiment and as the V2 model `sentiment`, answering what the package's own code answers.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client, HttpError, outputOf, textOf } from "shoal/client";
import { runsByWordCount } from "../examples/sentiment/classify.js";
import { SENTENCES } from "./fixtures/sentences.js";
import { assertError, post, startServer, waitFor, type ServerProcess } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

const dracula = createRequire(import.meta.url)("dracula-sentiment") as { score(text: string): number[]; analyze(text: string): string };

/** What the package's own code says of a sentence, as the server answers it. */
function expected(sentence: string): { label: string; score: number } {
  const [negative, , positive] = dracula.score(sentence) as [number, number, number];
  return positive > negative ? { label: "positive", score: positive } : { label: "negative", score: negative };
}

describe("runs by word count", () => {
  test("texts of similar length share one run, shortest first, and padding stays under twice the words", () => {
    assert.deepEqual(runsByWordCount([5, 7, 6, 8]), [[0, 2, 1, 3]]);
    // Three one-word texts and one of 20: padding all to 20 would be 80 words for 23.
    assert.deepEqual(runsByWordCount([1, 20, 1, 1]), [[0, 2, 3], [1]]);
    assert.deepEqual(runsByWordCount([3]), [[0]]);
    assert.deepEqual(runsByWordCount([]), []);
  });

  test("a run holds at most maxPadded words in all", () => {
    assert.deepEqual(runsByWordCount([10, 10, 10, 10, 10], 30), [[0, 1, 2], [3, 4]]);
    // A tighter slack: 10 and 12 pad to 24 for 22 words; 20 more would pad to 60 for 42.
    assert.deepEqual(runsByWordCount([20, 10, 12], 4096, 1.25), [[1, 2], [0]]);
    assert.deepEqual(runsByWordCount([20, 10, 12]), [[1, 2, 0]]);
    const counts = Array.from({ length: 64 }, (_, i) => 1 + ((i * 37) % 900));
    const runs = runsByWordCount(counts);
    assert.deepEqual(runs.flat().sort((a, b) => a - b), counts.map((_, i) => i), "every text in one run");
    for (const run of runs) assert.ok(run.length * Math.max(...run.map((i) => counts[i]!)) <= 4096, `run ${run}`);
  });
});

describe("examples/sentiment/server.ts", () => {
  let server: ServerProcess;
  // An empty models cache: the server makes its model on first start.
  const models = mkdtempSync(join(tmpdir(), "shoal-sentiment-"));
  before(async () => {
    server = await startServer("examples/sentiment/server.ts", { startTimeoutMs: 60_000, env: { SHOAL_MODELS_DIR: models } });
  });
  after(async () => {
    await server?.stop();
    rmSync(models, { recursive: true, force: true });
  });

  test("makes its model on first start, and prints curl commands that work", async () => {
    assert.match(server.stdout, new RegExp(`^made the sentiment model in ${models}/sentiment$`, "m"));
    // The commands are printed once run() resolves, which may come just after the "ready" line.
    const sentiment = await waitFor("the curl commands", () => server.stdout.match(/curl -X POST (http:\/\/\S+\/sentiment) -d '(.*)'$/m) ?? undefined);
    const reply = await post(`${server.url}/sentiment`, JSON.parse(sentiment[2]!));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.label, "positive");
  });

  test("POST /sentiment answers what dracula-sentiment's own code answers, batched", async () => {
    const before = await batchSizes(server.url, "Sentiment_1");
    // Each sentence twice, all at once, so that batches mix texts of different lengths.
    const sentences = [...SENTENCES, ...SENTENCES];
    const replies = await Promise.all(sentences.map(([text]) => post(`${server.url}/sentiment`, { text })));
    replies.forEach((reply, i) => {
      const [text, label] = sentences[i]!;
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(Object.keys(reply.json).sort(), ["label", "score"]);
      assert.equal(reply.json.label, label, text);
      assert.equal(dracula.analyze(text), label);
      const want = expected(text).score;
      assert.ok(Math.abs(reply.json.score - want) < 1e-5, `"${text}": ${reply.json.score}, the package's ${want}`);
    });
    const after = await batchSizes(server.url, "Sentiment_1");
    assert.equal(after.items - before.items, sentences.length);
    assert.ok(after.batches - before.batches < sentences.length, `${sentences.length} requests took ${after.batches - before.batches} batches`);
  });

  test("a text without words, too many words or no text is a 422, and its batch's others are answered", async () => {
    const bad = [{ text: "" }, { text: "   " }, { text: "word ".repeat(1001) }, { text: 5 }, {}];
    const replies = await Promise.all([...bad, { text: "puppies" }].map((body) => post(`${server.url}/sentiment`, body)));
    assertError(replies[0]!, 422, "request validation error: text: must hold at least one word");
    assertError(replies[1]!, 422, "request validation error: text: must hold at least one word");
    assertError(replies[2]!, 422, "request validation error: text: must hold at most 1000 words");
    assertError(replies[3]!, 422, /^request validation error: text: .*expected string/);
    assertError(replies[4]!, 422, /^request validation error: text: .*expected string/);
    assert.equal(replies[5]!.status, 200, replies[5]!.text);
    assert.equal(replies[5]!.json.label, "positive");
    assertError(await post(`${server.url}/sentiment`, "not json"), 400, /^decoding error: /);
  });

  test("the V2 model takes BYTES texts and gives a label and a score for each", async () => {
    const client = new Client(server.url);
    const metadata = await client.v2.modelMetadata("sentiment");
    assert.deepEqual(metadata.inputs, [{ name: "text", datatype: "BYTES", shape: [-1] }]);
    const texts = SENTENCES.map(([s]) => s);
    const response = await client.v2.infer("sentiment", { inputs: [{ name: "text", data: texts }] });
    const [label, score] = [outputOf(response, "label"), outputOf(response, "score")];
    assert.deepEqual([label.datatype, label.shape], ["BYTES", [texts.length]]);
    assert.deepEqual([score.datatype, score.shape], ["FP32", [texts.length]]);
    assert.deepEqual(response.outputs.map((o) => o.name), ["label", "score"]);
    texts.forEach((text, i) => {
      assert.equal(textOf(label)[i], SENTENCES[i]![1], text);
      assert.ok(Math.abs((score.data[i] as number) - expected(text).score) < 1e-5, text);
    });
  });

  test("a V2 request with an empty text fails alone, naming the element", async () => {
    const client = new Client(server.url);
    const infer = (data: string[]) => client.v2.infer("sentiment", { inputs: [{ name: "text", data }] });
    const [bad, good] = await Promise.allSettled([infer(["What a great day", " "]), infer(["terror"])]);
    assert.equal(bad.status, "rejected");
    assert.ok(bad.reason instanceof HttpError);
    assert.equal(bad.reason.status, 400);
    assert.equal(bad.reason.message, "bad request: input 'text': element 1 must hold at least one word");
    assert.equal(good.status, "fulfilled");
    assert.deepEqual(textOf(outputOf(good.value, "label")), ["negative"]);
  });
});
