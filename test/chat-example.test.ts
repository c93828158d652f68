/**
 * examples/chat/server.ts: SmolLM2-135M-Instruct (npm run models -- smollm2) run by llama.cpp as
 * a StepWorker in a child process, behind the OpenAI API, driven by the official `openai` client:
 * streaming and not, `usage` and `finish_reason`, seeds, stop strings, log-probabilities, and a
 * client that leaves mid-stream freeing the worker's only sequence for the next request.
 *
 * Then the same file as a model of the repository (`"runtime": "llama"`), on the V2 generate routes.
 *
 * The model comes from PyPI; where it cannot be had the tests skip and say why, unless
 * SHOAL_REQUIRE_MODELS is set (CI sets it), where they fail. Outputs are kept to a few tokens.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { copyFileSync, linkSync } from "node:fs";
import { join } from "node:path";
import { modelsDir } from "../scripts/models/models-dir.js";
import { modelUnavailable, post, startServer, waitForMetric, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { sseData } from "./stream-client.js";

const skip = await modelUnavailable("smollm2");
const MODEL = "SmolLM2-135M-Instruct";
// A question the model answers in a dozen tokens, then ends its turn.
const SHORT = [{ role: "user" as const, content: "What is 2 + 2?" }];

describe("examples/chat/server.ts: SmolLM2 on llama.cpp behind the OpenAI API", { skip }, () => {
  let server: ServerProcess;
  let client: OpenAI;

  before(async () => {
    // One sequence: a request that did not free its sequence would hold up the next one. The
    // machine may be busy: a first token gets more than the default 3 s.
    server = await startServer("examples/chat/server.ts", { args: ["--timeout", "30000"], env: { SEQUENCES: "1", THREADS: "1", CONTEXT_SIZE: "1024" }, startTimeoutMs: 60_000 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(() => server?.stop());

  test("the model is listed", async () => {
    assert.deepEqual((await client.models.list()).data.map((m) => m.id), [MODEL]);
  });

  test("a chat answered at once ends its turn: finish_reason stop, usage counted; streamed, the same text in pieces", async () => {
    const whole = await client.chat.completions.create({ model: MODEL, messages: SHORT, max_tokens: 40, temperature: 0 });
    const answer = whole.choices[0]!;
    assert.equal(answer.finish_reason, "stop", "the model ended its turn before 40 tokens");
    assert.match(answer.message.content ?? "", /4/);
    assert.ok(whole.usage!.completion_tokens > 0 && whole.usage!.completion_tokens < 40);
    // The chat template of the GGUF file: its default system prompt, the question, the start of the answer.
    assert.ok(whole.usage!.prompt_tokens > 20, `prompt_tokens ${whole.usage!.prompt_tokens}`);
    assert.equal(whole.usage!.total_tokens, whole.usage!.prompt_tokens + whole.usage!.completion_tokens);

    const stream = await client.chat.completions.create({ model: MODEL, messages: SHORT, max_tokens: 40, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let pieces = 0;
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice !== undefined) {
        text += choice.delta.content ?? "";
        pieces++;
        finish = choice.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, answer.message.content);
    assert.ok(pieces > 3, `${pieces} pieces`);
    assert.equal(finish, "stop");
    assert.deepEqual(usage, whole.usage);
  });

  test("max_tokens ends a completion with finish_reason length, after exactly that many tokens", async () => {
    const res = await client.completions.create({ model: MODEL, prompt: "Fish swim in", max_tokens: 5, temperature: 0 });
    assert.equal(res.choices[0]!.finish_reason, "length");
    assert.equal(res.usage!.completion_tokens, 5);
    assert.ok(res.usage!.prompt_tokens >= 3);
    assert.notEqual(res.choices[0]!.text.trim(), "");
  });

  test("temperature 0 gives the same answer twice, and so does a seed at temperature 0.9", async () => {
    const ask = (extra: object) => client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 12, ...extra });
    const greedy = await Promise.all([ask({ temperature: 0 }), ask({ temperature: 0 })]);
    assert.equal(greedy[0].choices[0]!.text, greedy[1].choices[0]!.text);
    const seeded = [await ask({ temperature: 0.9, seed: 7 }), await ask({ temperature: 0.9, seed: 7 })];
    assert.equal(seeded[0]!.choices[0]!.text, seeded[1]!.choices[0]!.text);
    // Other seeds draw other texts: one of several differs from the first (the chance all agree is nil).
    const others = await Promise.all([8, 9, 10].map((seed) => ask({ temperature: 0.9, seed, top_k: 40, top_p: 0.95 })));
    assert.ok(others.some((o) => o.choices[0]!.text !== seeded[0]!.choices[0]!.text), "other seeds gave the same text");
  });

  test("a stop string cuts the text before it, with finish_reason stop", async () => {
    const free = await client.completions.create({ model: MODEL, prompt: "Fish swim in", max_tokens: 12, temperature: 0 });
    const text = free.choices[0]!.text;
    // A word from the middle of the greedy text: the same text up to it comes back.
    const word = text.trim().split(/\s+/)[2]!;
    const cut = await client.completions.create({ model: MODEL, prompt: "Fish swim in", max_tokens: 12, temperature: 0, stop: [word] });
    assert.equal(cut.choices[0]!.text, text.slice(0, text.indexOf(word)));
    assert.equal(cut.choices[0]!.finish_reason, "stop");
    assert.ok(cut.usage!.completion_tokens < 12);
  });

  test("logprobs: each token generated, with its text and a log-probability ≤ 0", async () => {
    const res = await client.chat.completions.create({ model: MODEL, messages: SHORT, max_tokens: 6, temperature: 0, logprobs: true });
    const content = res.choices[0]!.logprobs!.content!;
    assert.equal(content.length, res.usage!.completion_tokens);
    assert.equal(content.map((t) => t.token).join(""), res.choices[0]!.message.content);
    for (const t of content) assert.ok(t.logprob <= 0 && Number.isFinite(t.logprob), `${t.token}: ${t.logprob}`);
    const completion = await client.completions.create({ model: MODEL, prompt: "Fish swim in", max_tokens: 3, temperature: 0, logprobs: 0 });
    assert.equal(completion.choices[0]!.logprobs!.tokens!.length, 3);
    const refused = await post(`${server.url}/v1/chat/completions`, { model: MODEL, messages: SHORT, logprobs: true, top_logprobs: 2 });
    assert.equal(refused.status, 400);
    assert.match(refused.json.error.message, /^bad request: top_logprobs: only 0: the log-probabilities of the tokens generated are given/);
  });

  test("a client that leaves mid-stream frees the only sequence: the next request is answered at once", async () => {
    const stream = await client.completions.create({ model: MODEL, prompt: "A long story:", max_tokens: 1000, temperature: 0, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming);
    let pieces = 0;
    for await (const _ of stream) if (++pieces === 3) break;
    await waitForMetric(server.url, "shoal_stream_cancellations_total", { route: "/v1/completions", reason: "client" }, (n) => n >= 1);
    const started = performance.now();
    const next = await client.completions.create({ model: MODEL, prompt: "Fish swim in", max_tokens: 3, temperature: 0 });
    const seconds = (performance.now() - started) / 1000;
    assert.equal(next.usage!.completion_tokens, 3);
    // Had the sequence been kept, this would wait for the ~1000 tokens left of the first (tens of seconds).
    assert.ok(seconds < 8, `the next request took ${seconds.toFixed(1)} s`);
  });

  test("a prompt longer than the sequence's context is a 400 that says so", async () => {
    const reply = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "fish ".repeat(1100), max_tokens: 2 });
    assert.equal(reply.status, 400);
    assert.match(reply.json.error.message, /^bad request: the prompt is 1101 tokens; this model's context holds 1023 at most/);
  });
});

describe('the model repository\'s "llama" runtime: a .gguf file as a V2 model', { skip }, () => {
  const repo = new ModelRepo();
  let server: ServerProcess;

  before(async () => {
    const gguf = join(modelsDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf");
    repo.settings("smol", { name: "smol", runtime: "llama", maxBatchSize: 2, parameters: { contextSize: 256, threads: 1 } });
    const file = join(repo.dir, "smol", "smol.gguf");
    try {
      linkSync(gguf, file);
    } catch {
      copyFileSync(gguf, file);
    }
    server = await serveRepository(repo.dir, ["--workers", "1", "--timeout", "30000"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("its metadata: text_input in, text_output out, platform llama.cpp", async () => {
    const metadata = (await (await fetch(`${server.url}/v2/models/smol`)).json()) as Record<string, unknown>;
    assert.equal(metadata.platform, "llama.cpp");
    assert.deepEqual(metadata.inputs, [{ name: "text_input", datatype: "BYTES", shape: [1] }]);
    assert.deepEqual(metadata.outputs, [{ name: "text_output", datatype: "BYTES", shape: [1] }]);
  });

  test("generate_stream streams the pieces that generate answers whole; sampling settings from parameters", async () => {
    const body = { text_input: "Fish swim in", parameters: { max_tokens: 4, temperature: 0 } };
    const streamed = sseData(await (await fetch(`${server.url}/v2/models/smol/generate_stream`, { method: "POST", body: JSON.stringify(body) })).text());
    assert.equal(streamed.length, 4, "one event per token");
    const whole = await post(`${server.url}/v2/models/smol/generate`, body);
    assert.equal(whole.status, 200, whole.text);
    assert.deepEqual(whole.json.text_output, streamed.map((e: { text_output: string }) => e.text_output));
    const bad = await post(`${server.url}/v2/models/smol/generate`, { text_input: "Fish", parameters: { max_tokens: 0 } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /^bad request: parameters\.max_tokens: /);
  });
});
