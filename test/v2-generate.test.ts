/**
 * Streaming models on the shared pool and the V2 generate extension: `/generate`,
 * `/generate_stream` and `/infer_stream` over a module model that streams (test/fixtures/models/
 * spell.ts) and one that does not (upper.ts), a streamed answer joined for a plain `/infer`, and a
 * client that leaves mid-stream freeing the worker.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { post, waitForMetric, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

// The data of each Server-Sent Event of a body, parsed.
function events(body: string): unknown[] {
  return body
    .split("\n\n")
    .filter((e) => e !== "")
    .map((e) => JSON.parse(e.replace(/^data: /, "")));
}

describe("streaming models and the V2 generate extension", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.module("spell", "spell.ts");
    repo.module("upper", "upper.ts", { parameters: { prefix: "" } });
    server = await serveRepository(repo.dir, ["--workers", "1"]);
    url = `http://127.0.0.1:${server.port}`;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("generate_stream sends one event per chunk, the outputs by name", async () => {
    const res = await fetch(`${url}/v2/models/spell/generate_stream`, { method: "POST", body: JSON.stringify({ text_input: "fish", id: "r1" }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.deepEqual(events(await res.text()), ["f", "i", "s", "h"].map((c) => ({ model_name: "spell", id: "r1", text_output: c })));
  });

  test("generate answers once: a streaming model's chunks joined, a plain model's one response", async () => {
    const spelled = await post(`${url}/v2/models/spell/generate`, { text_input: "ab" });
    assert.equal(spelled.status, 200);
    assert.deepEqual(spelled.json, { model_name: "spell", text_output: ["a", "b"] });
    const upper = await post(`${url}/v2/models/upper/generate`, { text: "fish", parameters: { suffix: "!" } });
    assert.deepEqual(upper.json, { model_name: "upper", upper: "FISH!", length: 5 });
  });

  test("generate_stream of a model that does not stream is one event", async () => {
    const res = await fetch(`${url}/v2/models/upper/generate_stream`, { method: "POST", body: JSON.stringify({ text: "x" }) });
    assert.deepEqual(events(await res.text()), [{ model_name: "upper", upper: "X", length: 1 }]);
  });

  test("infer_stream sends V2 responses as events; infer joins them, or streams them when asked", async () => {
    const request = { inputs: [{ name: "text_input", datatype: "BYTES", shape: [1], data: ["ab"] }] };
    const streamed = await fetch(`${url}/v2/models/spell/infer_stream`, { method: "POST", body: JSON.stringify(request) });
    const responses = events(await streamed.text()) as { outputs: { name: string; data: string[]; shape: number[] }[] }[];
    assert.deepEqual(
      responses.map((r) => r.outputs[0]!.data),
      [["a"], ["b"]],
    );
    const joined = await post(`${url}/v2/models/spell/infer`, request, { accept: "application/json" });
    assert.deepEqual((joined.json as { outputs: unknown[] }).outputs, [{ name: "text_output", datatype: "BYTES", shape: [2], data: ["a", "b"] }]);
    const asked = await fetch(`${url}/v2/models/spell/infer`, { method: "POST", body: JSON.stringify(request), headers: { accept: "application/x-ndjson" } });
    assert.equal(asked.headers.get("content-type"), "application/x-ndjson");
    assert.equal((await asked.text()).trim().split("\n").length, 2);
  });

  test("bad generate requests are 400s with the reason", async () => {
    for (const [body, reason] of [
      ["[1]", /must be a JSON object/],
      ["{}", /at least one input field/],
      ['{"text_input": {"a": 1}}', /field 'text_input' must be a string/],
      ['{"text_input": "x", "id": 7}', /'id' must be a string/],
      ['{"text_input": 5}', /input 'text_input' must be BYTES/],
    ] as const) {
      const reply = await post(`${url}/v2/models/spell/generate`, body);
      assert.equal(reply.status, 400, body);
      assert.match((reply.json as { error: string }).error, reason, body);
    }
    const missing = await post(`${url}/v2/models/nope/generate_stream`, { text_input: "x" });
    assert.equal(missing.status, 404);
  });

  test("a client that leaves mid-stream frees the only worker for the next request", async () => {
    const leaving = new AbortController();
    const slow = await fetch(`${url}/v2/models/spell/generate_stream`, { method: "POST", body: JSON.stringify({ text_input: "x".repeat(200), parameters: { delay_ms: 50 } }), signal: leaving.signal });
    const first = await slow.body!.getReader().read();
    assert.match(Buffer.from(first.value!).toString(), /^data: /);
    leaving.abort();
    await waitForMetric(url, "shoal_stream_cancellations_total", { route: "/v2/models/spell/generate_stream", reason: "client" }, (n) => n >= 1);
    // With one worker, this is answered only once the abandoned stream has stopped.
    const next = await post(`${url}/v2/models/spell/generate`, { text_input: "ok" });
    assert.deepEqual(next.json, { model_name: "spell", text_output: ["o", "k"] });
  });
});
