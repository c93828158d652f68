/**
 * The generative example (examples/generate/server.ts): the tiny ONNX decoder as a StepWorker
 * behind the OpenAI API, driven by the official `openai` client, streaming and not, with `usage`
 * counted; sequences of different lengths at once; a client that leaves mid-stream.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { makeTinyGpt } from "../examples/generate/make-model.js";
import { ROOT, startServer, waitForMetric, type ServerProcess } from "./helpers.js";

describe("examples/generate: a tiny decoder behind the OpenAI API", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-tiny-gpt-test-"));
  let server: ServerProcess;
  let client: OpenAI;
  let url: string;

  before(async () => {
    makeTinyGpt(dir);
    server = await startServer(join(ROOT, "examples", "generate", "server.ts"), { env: { MODEL_DIR: dir } });
    url = `http://127.0.0.1:${server.port}`;
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a streamed chat gives the text of the same chat answered at once, and its usage", async () => {
    const messages = [{ role: "user" as const, content: "Fish swim in shoals." }];
    const whole = await client.chat.completions.create({ model: "tiny-gpt", messages, max_tokens: 20, temperature: 0 });
    const stream = await client.chat.completions.create({ model: "tiny-gpt", messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.choices.length > 0) chunks++;
      usage ??= chunk.usage ?? undefined;
    }
    assert.equal(text, whole.choices[0]!.message.content);
    assert.ok(chunks > 1, `streamed in ${chunks} chunks`);
    assert.deepEqual(usage, whole.usage);
    assert.ok(whole.usage!.prompt_tokens > 0);
    assert.ok(whole.usage!.completion_tokens >= 1 && whole.usage!.completion_tokens <= 20);
  });

  test("requests of different lengths at once each get exactly the tokens they asked for", async () => {
    const lengths = [3, 40, 8, 64, 1, 17, 30, 5];
    const answers = await Promise.all(lengths.map((max_tokens, i) => client.completions.create({ model: "tiny-gpt", prompt: `prompt ${i}`, max_tokens, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming)));
    answers.forEach((a, i) => {
      assert.equal(a.usage!.completion_tokens, lengths[i], `request ${i}`);
      assert.equal(a.choices[0]!.finish_reason, "length");
    });
    // Greedy decoding gives a prompt the same text whatever it was batched with.
    const alone = await client.completions.create({ model: "tiny-gpt", prompt: "prompt 3", max_tokens: 64, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(alone.choices[0]!.text, answers[3]!.choices[0]!.text);
  });

  test("a client that leaves mid-stream is counted, and the model serves on", async () => {
    const stream = await client.completions.create({ model: "tiny-gpt", prompt: "a long one", max_tokens: 400, temperature: 0, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming);
    for await (const _ of stream) break;
    await waitForMetric(url, "shoal_stream_cancellations_total", { route: "/v1/completions", reason: "client" }, (n) => n >= 1);
    const next = await client.completions.create({ model: "tiny-gpt", prompt: "next", max_tokens: 2, temperature: 0 });
    assert.equal(next.object, "text_completion");
  });
});
