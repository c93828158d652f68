/**
 * examples/vad-pipeline.ts: a CPU stage with two workers feeding a batched ONNX stage, the audio
 * passing between them as a Float32Array.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, assertError, post, startServer, type ServerProcess } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

describe("the two-stage VAD pipeline example", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(join(ROOT, "examples", "vad-pipeline.ts"));
  });
  after(() => server?.stop());

  test("runs both stages and finds the speech in examples/hello.wav", async () => {
    const listening = server.logs().find((l) => typeof l.msg === "string" && l.msg.startsWith("listening"))!;
    assert.deepEqual(listening.routes, { "/vad": ["AudioPrep_1", "VoiceActivity_2"] });
    const wav = readFileSync(join(ROOT, "examples", "hello.wav"));
    const reply = await post(`${server.url}/vad`, new Uint8Array(wav), { "content-type": "audio/wav" });
    assert.equal(reply.status, 200, reply.text);
    // The model stage accepts only audio whose samples are a Float32Array: a 200 means the typed
    // array crossed from the first stage intact.
    assert.equal(reply.json.probabilities.length, 29);
    assert.equal(reply.json.speech.length, 1, reply.text);
    assertError(await post(`${server.url}/vad`, "not a wav", { "content-type": "audio/wav" }), 422, "request validation error: the body is not a WAV file");
  });

  test("requests from concurrent clients share the model stage's batches", async () => {
    const replies = await Promise.all(Array.from({ length: 24 }, () => post(`${server.url}/vad`, { audio: new Array(4000).fill(0), sampleRate: 16000 })));
    assert.ok(replies.every((r) => r.status === 200 && r.json.probabilities.length === 3), replies.map((r) => r.status).join(","));
    const sizes = await batchSizes(server.url, "VoiceActivity_2");
    assert.ok(sizes.batches < sizes.items && sizes.single < sizes.batches, `batches above one item: ${JSON.stringify(sizes)}`);
  });
});
