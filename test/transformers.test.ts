/**
 * examples/transformers-server.ts on a tiny BERT-like model generated here: embeddings of the
 * model's width, the same in a batch as alone, and no network access attempted.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RecordFile, assertError, fixture, post, send, startServer, type ServerProcess } from "./helpers.js";
import { HIDDEN_SIZE, makeTinyBert } from "./fixtures/tiny-bert.js";

const TOLERANCE = 1e-5;

function assertClose(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, what);
  const worst = Math.max(...actual.map((v, i) => Math.abs(v - expected[i]!)));
  assert.ok(worst < TOLERANCE, `${what}: differs by up to ${worst}`);
}

describe("the transformers.js example", () => {
  let server: ServerProcess;
  const network = new RecordFile();
  before(async () => {
    const modelDir = makeTinyBert(network.dir);
    server = await startServer(fixture("offline.ts"), { env: { MODEL_DIR: modelDir, RECORD_FILE: network.path } });
  });
  after(async () => {
    await server?.stop();
    network.remove();
  });

  const embed = async (text: string): Promise<number[]> => {
    const reply = await post(`${server.url}/inference`, { text });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(Object.keys(reply.json), ["embedding"]);
    return reply.json.embedding;
  };

  test("answers a unit-length embedding of the model's width, the same for the same text", async () => {
    const embedding = await embed("Serving models from TypeScript");
    assert.equal(embedding.length, HIDDEN_SIZE);
    assert.ok(
      embedding.every((v) => Number.isFinite(v)),
      "finite values",
    );
    assert.ok(Math.abs(Math.hypot(...embedding) - 1) < TOLERANCE, "normalised");
    assertClose(await embed("Serving models from TypeScript"), embedding, "the same text again");
    const other = await embed("a fish");
    assert.ok(
      other.some((v, i) => Math.abs(v - embedding[i]!) > 1e-3),
      "another text, another embedding",
    );
  });

  test("concurrent requests are batched, and each gets the embedding it gets alone", async () => {
    const texts = Array.from({ length: 24 }, (_, i) => `text ${i} ${"fish ".repeat(i % 7)}swimming`);
    const alone = [];
    for (const text of texts.slice(0, 4)) alone.push(await embed(text));
    const before = await batchStats();
    const together = await Promise.all(texts.map(embed));
    const after = await batchStats();
    for (let i = 0; i < alone.length; i++) assertClose(together[i]!, alone[i]!, `"${texts[i]}" in a batch`);
    const batches = after.count - before.count;
    assert.equal(after.sum - before.sum, texts.length, "every text computed once");
    assert.ok(batches < texts.length, `${texts.length} requests in ${batches} batches`);
  });

  test("an empty text is refused with 422 before it reaches the model", async () => {
    assertError(await post(`${server.url}/inference`, { text: "" }), 422, /^request validation error: text: /);
    assertError(await post(`${server.url}/inference`, { words: ["a"] }), 422, "request validation error: text: missing (expected string)");
  });

  test("the OpenAPI document shows the example's schemas", async () => {
    const doc = (await send(`${server.url}/openapi.json`)).json;
    const ref = doc.paths["/inference"].post.requestBody.content["application/json"].schema.$ref as string;
    const input = doc.components.schemas[ref.split("/").pop()!];
    assert.deepEqual(input.required, ["text"]);
  });

  test("no network access was attempted: the model came from the local folder", () => {
    const lines = network.lines();
    const guarded = lines.filter((l) => l.startsWith("guarded thread "));
    // The server's thread and the two workers' threads, each guarded before loading the model.
    assert.ok(guarded.length >= 3, `guarded: ${guarded}`);
    assert.deepEqual(lines.filter((l) => !l.startsWith("guarded thread ")), []);
  });

  // The stage's batch-size histogram: how many batches, and how many items in all.
  async function batchStats(): Promise<{ count: number; sum: number }> {
    const text = (await send(`${server.url}/metrics`)).text;
    const value = (name: string) => Number(new RegExp(`^shoal_stage_batch_size_${name}\\{stage="Embed_1"\\} (\\S+)$`, "m").exec(text)?.[1]);
    return { count: value("count"), sum: value("sum") };
  }
});
