/**
 * A batch that one client's value makes fail as a whole (an id outside an embedding table, which
 * fails onnxruntime's run of the whole stack): the batch runs again in parts, the item at fault
 * gets its own 400 naming its input, the others their answers, and the extra runs show in
 * `shoal_stage_batch_retry_runs_total`. On stages (thread and process workers) and on the shared
 * model pool, and for a streaming Worker; a Worker may opt out; a model that fails everything is
 * not run once per item.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { embeddingValue } from "./fixtures/make-embedding.js";
import { RecordFile, assertError, fixture, metric, post, send, startServer, type Reply, type ServerProcess } from "./helpers.js";
import { serveRepository, ModelRepo } from "./model-helpers.js";
import { ModelDir } from "./onnx-helpers.js";
import { sseData } from "./stream-client.js";

const ROWS = 10;
const WIDTH = 4;
// A batch's worth of concurrent requests, and where the bad ids go.
const N = 16;
const BAD = 5;
const RETRIES = "shoal_stage_batch_retry_runs_total";
// What onnxruntime says of an id outside the table, as the client reads it.
const outside = (id: number) =>
  new RegExp(`^bad request: the model cannot run on input 'ids' \\(int64 \\[1, 1\\]\\): Gather node 'lookup': indices element out of data bounds, idx=${id} must be within the inclusive range \\[-${ROWS},${ROWS - 1}\\]$`);

// Request i's id: a good one, or `bad[i]`.
function ids(bad: Record<number, number> = {}): number[] {
  return Array.from({ length: N }, (_, i) => bad[i] ?? i % ROWS);
}

function assertRow(row: unknown, id: number, context: string): void {
  assert.ok(Array.isArray(row) && row.length === WIDTH, `${context}: ${JSON.stringify(row)}`);
  row.forEach((v: number, j) => assert.ok(Math.abs(v - embeddingValue(id, j)) < 1e-6, `${context}: [${j}] ${v} for id ${id}`));
}

// Each reply is its id's row, but those of `bad` ids, answered 400 with what was wrong.
function assertAnswers(replies: Reply[], sent: number[], row: (reply: Reply) => unknown): void {
  replies.forEach((reply, i) => {
    const id = sent[i]!;
    if (id >= ROWS || id < -ROWS) assertError(reply, 400, outside(id));
    else {
      assert.equal(reply.status, 200, `request ${i}: ${reply.text}`);
      assertRow(row(reply), id, `request ${i}`);
    }
  });
}

describe("a poisoned batch on stages", () => {
  const models = new ModelDir();
  const calls = new RecordFile();
  let server: ServerProcess;

  const lookups = (route: string, sent: number[]) => Promise.all(sent.map((id) => post(`${server.url}${route}`, { ids: [[id]] })));
  const retries = async (stage: string) => (await metric(server.url, RETRIES, { stage })) ?? NaN;
  const vector = (reply: Reply) => reply.json.vector[0][0];

  before(async () => {
    const model = models.embedding("embedding", ROWS, WIDTH);
    server = await startServer(fixture("poisoned-batch.ts"), { env: { EMBEDDING_MODEL: model, RECORD_FILE: calls.path } });
  });
  after(async () => {
    await server?.stop();
    models.remove();
    calls.remove();
  });

  for (const [route, stage, where] of [["/embed", "Embedding_1", "a worker thread"], ["/embed-process", "EmbeddingProcess_2", "a worker process"]] as const) {
    test(`16 concurrent lookups, one id outside the table, in ${where}: 15 answers, one 400 naming its input, 8 runs more`, async () => {
      assert.equal(await retries(stage), 0, "the counter is shown before any split");
      const sent = ids({ [BAD]: 99 });
      assertAnswers(await lookups(route, sent), sent, vector);
      // Halves of 8, 4, 2 and 1: two runs at each of the four levels.
      assert.equal(await retries(stage), 8);
    });
  }

  test("two bad ids in one batch each get their own 400, the other 14 their rows", async () => {
    const before = await retries("Embedding_1");
    const sent = ids({ 2: 42, 13: -11 });
    assertAnswers(await lookups("/embed", sent), sent, vector);
    assert.ok((await retries("Embedding_1")) > before);
  });

  test("a bad id alone is a 400 too, with no run again, and no error in the log: it is the client's", async () => {
    const before = await retries("Embedding_1");
    assertError(await post(`${server.url}/embed`, { ids: [[ROWS]] }, { "x-request-id": "alone" }), 400, outside(ROWS));
    assert.equal(await retries("Embedding_1"), before);
    assert.deepEqual(server.logs().filter((l) => l.requestId === "alone"), []);
    // ONNX Runtime's own line for the failed run is left out of stderr too.
    assert.doesNotMatch(server.stderr, /onnxruntime/);
  });

  test("the stage of a model with an int64 input starts, its row of zeros the route's example in /openapi.json", async () => {
    const doc = (await send(`${server.url}/openapi.json`)).json;
    assert.deepEqual(doc.paths["/embed"].post.requestBody.content["application/json"].example, { ids: [[0]] });
  });

  test("a Worker that opts out (splitFailedBatches = false) fails the whole batch, as the runtime failed it", async () => {
    const replies = await lookups("/embed-whole", ids({ [BAD]: 99 }));
    for (const reply of replies) assertError(reply, 500, "inference internal error");
    assert.equal(await retries("EmbeddingWhole_3"), 0);
  });

  test("a model that fails every batch runs a batch of 16 three times, not once per item, and every item gets the error", async () => {
    const replies = await lookups("/broken", ids());
    for (const reply of replies) assertError(reply, 500, "inference internal error");
    // Both halves failed the same way: the failure is the batch's, and the split stops there.
    assert.deepEqual(calls.lines(), ["broken 16", "broken 8", "broken 8"]);
    assert.equal(await retries("Broken_4"), 2);
  });

  test("a streaming Worker's forward() that fails a batch before its streams start: 7 streams run, the poisoned request gets its 500", async () => {
    const replies = await Promise.all(Array.from({ length: 8 }, (_, k) => post(`${server.url}/streams`, k === 6 ? { tag: "p", poison: true } : { tag: `s${k}` }, { accept: "text/event-stream" })));
    replies.forEach((reply, k) => {
      if (k === 6) return assertError(reply, 500, "inference internal error");
      assert.equal(reply.status, 200, reply.text);
      // Each stream came from the run of the part without the poisoned request: halves of 4, 2, 1.
      const batch = k < 4 ? 4 : k < 6 ? 2 : 1;
      assert.deepEqual(sseData(reply.text), [0, 1, 2].map((i) => ({ tag: `s${k}`, i, batch })));
    });
    assert.equal(await retries("Streams_5"), 6);
  });
});

for (const isolation of ["thread", "process"] as const) {
  describe(`a poisoned batch on the shared model pool (${isolation} workers)`, () => {
    const repo = new ModelRepo();
    let server: ServerProcess;

    before(async () => {
      repo.embedding("embedding", "", ROWS, WIDTH);
      repo.settings("embedding", { name: "embedding", runtime: "onnx", maxBatchSize: N, maxWaitMs: 2000 });
      server = await serveRepository(repo.dir, ["--model-isolation", isolation]);
    });
    after(async () => {
      await server?.stop();
      repo.remove();
    });

    test("16 concurrent V2 requests, one id outside the table: 15 answers, one 400 naming its input, 8 runs more", async () => {
      const sent = ids({ [BAD]: 99 });
      const replies = await Promise.all(sent.map((id) => post(`${server.url}/v2/models/embedding/infer`, { inputs: [{ name: "ids", datatype: "INT64", shape: [1, 1], data: [id] }] })));
      assertAnswers(replies, sent, (reply) => {
        const [output] = reply.json.outputs as { name: string; datatype: string; shape: number[]; data: number[] }[];
        assert.deepEqual({ ...output, data: undefined }, { name: "vector", datatype: "FP32", shape: [1, 1, WIDTH], data: undefined });
        return output!.data;
      });
      assert.equal(await metric(server.url, RETRIES, { model: "embedding" }), 8);
    });
  });
}
