/**
 * The OpenAI-compatible routes, driven by the official `openai` client from npm against a
 * text-generation StepWorker whose tokens are known (test/fixtures/text-lm.ts): models, plain
 * and chat completions, streaming and not, `usage`, stop strings, and errors in OpenAI's shape.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { fixture, post, startServer, type ServerProcess } from "./helpers.js";

describe("the OpenAI API", () => {
  let server: ServerProcess;
  let client: OpenAI;
  let url: string;

  before(async () => {
    server = await startServer(fixture("text-lm.ts"));
    url = `http://127.0.0.1:${server.port}`;
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(() => server?.stop());

  test("lists the models it serves", async () => {
    const models = await client.models.list();
    assert.deepEqual(
      models.data.map((m) => [m.id, m.object, m.owned_by]),
      [
        ["echo", "model", "shoal"],
        ["garbled", "model", "shoal"],
        ["half-garbled", "model", "shoal"],
        ["plain-garbled", "model", "shoal"],
      ],
    );
  });

  test("a completion, cut by max_tokens, with its usage", async () => {
    const completion = await client.completions.create({ model: "echo", prompt: "fish swim in shoals", max_tokens: 3 });
    assert.equal(completion.object, "text_completion");
    assert.equal(completion.model, "echo");
    assert.equal(completion.choices[0]!.text, "fish swim in");
    assert.equal(completion.choices[0]!.finish_reason, "length");
    assert.deepEqual(completion.usage, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
  });

  test("a chat completion ended by a stop word", async () => {
    const chat = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "one two three four" }], stop: ["three"] });
    assert.equal(chat.object, "chat.completion");
    assert.deepEqual(chat.choices[0]!.message, { role: "assistant", content: "user: one two" });
    assert.equal(chat.choices[0]!.finish_reason, "stop");
    assert.deepEqual(chat.usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
  });

  test("a streamed chat: deltas in order, the role first, then the usage chunk", async () => {
    const stream = await client.chat.completions.create({
      model: "echo",
      messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    let role: string | undefined;
    let finish: string | null | undefined;
    let usage: unknown;
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      assert.equal(chunk.object, "chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (choice === undefined) continue;
      role ??= choice.delta.role;
      if (choice.delta.content) deltas.push(choice.delta.content);
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(ids.size, 1, "every chunk has the completion's id");
    assert.equal(role, "assistant");
    assert.equal(deltas.join(""), "system: be brief user: hi");
    assert.ok(deltas.length >= 5, `one delta a token, got ${deltas.length}`);
    assert.equal(finish, "stop");
    assert.deepEqual(usage, { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 });
  });

  test("a streamed completion ends with [DONE] on the wire", async () => {
    const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "echo", prompt: "a b", stream: true }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const events = (await res.text()).split("\n\n").filter((e) => e !== "");
    assert.equal(events.at(-1), "data: [DONE]");
    const texts = events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, "")).choices[0].text);
    assert.deepEqual(texts, ["a", " b", ""]);
  });

  test("requests of different lengths at once are each answered with their own tokens", async () => {
    const prompts = Array.from({ length: 12 }, (_, i) => Array.from({ length: i + 1 }, (_, j) => `w${i}-${j}`).join(" "));
    const answers = await Promise.all(prompts.map((prompt) => client.completions.create({ model: "echo", prompt, max_tokens: 50 })));
    answers.forEach((a, i) => assert.equal(a.choices[0]!.text, prompts[i]));
  });

  test("errors come in OpenAI's shape, with the client's error classes", async () => {
    await assert.rejects(client.completions.create({ model: "nope", prompt: "x" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.equal(err.code, "model_not_found");
      assert.match(err.message, /the model 'nope' does not exist/);
      return true;
    });
    await assert.rejects(client.completions.create({ model: "echo", prompt: "x", n: 2 }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.type, "invalid_request_error");
      assert.match(err.message, /^400 bad request: n: /);
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: "echo", messages: [] }), OpenAI.BadRequestError);
    const raw = await post(`${url}/v1/completions`, "not json");
    assert.equal(raw.status, 400);
    assert.deepEqual(Object.keys((raw.json as { error: object }).error).sort(), ["code", "message", "param", "type"]);
    const wrongMethod = await fetch(`${url}/v1/models`, { method: "POST", body: "{}" });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get("allow"), "GET, HEAD");
  });

  test("/openapi.json shows the generating route's stream and its chunk schema", async () => {
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as { paths: Record<string, { post: { responses: Record<string, { content: Record<string, { schema?: unknown }> }> } }> };
    const content = doc.paths["/generate"]!.post.responses["200"]!.content;
    assert.deepEqual(Object.keys(content), ["text/event-stream", "application/x-ndjson", "application/json"]);
    assert.deepEqual(content["application/json"]!.schema, { $ref: "#/components/schemas/EchoLM_1.output" }, "each chunk has the output schema");
  });

  test("a Worker whose answer the API cannot read fails its request, in OpenAI's shape, and the server serves on", async () => {
    await assert.rejects(client.completions.create({ model: "garbled", prompt: "x" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.InternalServerError);
      assert.match(err.message, /encoding error: the Worker's answer does not fit this API/);
      return true;
    });
    const res = await fetch(`${url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "garbled", prompt: "x", stream: true }) });
    assert.equal(res.status, 500, "the first chunk failed: nothing was streamed yet");
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, "server_error");
    const after = await client.completions.create({ model: "echo", prompt: "still here", max_tokens: 2 });
    assert.equal(after.choices[0]!.text, "still here");
  });
});
