/**
 * The example model repository, examples/models, served as the README says
 * (`shoal serve --model-repository examples/models`): Silero VAD stepped frame by frame over
 * examples/hello.wav with the V2 protocol, its probabilities turned into speech segments by the
 * module-runtime model, whose two versions differ as their settings say; a recording too short
 * for Silero VAD is the client's 400.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { EXAMPLE_MODELS, helloSamples, speechProbabilities } from "./deploy-helpers.js";
import { Client } from "shoal/client";
import { assertError, post, type ServerProcess } from "./helpers.js";
import { serveRepository } from "./model-helpers.js";

describe("examples/models: the example model repository", () => {
  let server: ServerProcess;

  before(async () => {
    server = await serveRepository(EXAMPLE_MODELS, ["--workers", "2"]);
  });
  after(async () => {
    await server?.stop();
  });

  test("every model version of the repository is ready", async () => {
    const index = await post(`${server.url}/v2/repository/index`, {});
    assert.deepEqual(index.json, [
      { name: "silero-vad", version: "1", state: "READY", reason: "" },
      { name: "speech-segments", version: "1", state: "READY", reason: "" },
      { name: "speech-segments", version: "2", state: "READY", reason: "" },
    ]);
  });

  test("Silero VAD finds the speech in examples/hello.wav, and speech-segments cuts it out", async () => {
    const probabilities = await speechProbabilities(server.url, helloSamples());
    // 2.7 s of audio: 0.6 s of silence, "Hello from Shoal." for 1.5 s, 0.6 s of silence.
    assert.equal(probabilities.length, 29);
    assert.ok(Math.max(...probabilities.slice(0, 4)) < 0.1, `silence at the start: ${probabilities}`);
    assert.ok(Math.max(...probabilities) > 0.9, `speech somewhere: ${probabilities}`);
    const client = new Client(server.url);
    const segments = async (version: string) => {
      const response = await client.v2.infer("speech-segments", { inputs: [{ name: "probabilities", data: Float32Array.from(probabilities) }] }, { version });
      const [start, end] = response.outputs.map((o) => [...(o.data as Float32Array)]);
      return start!.map((s, i) => ({ start: s, end: end![i]! }));
    };
    const tuned = await segments("2");
    assert.equal(tuned.length, 1, JSON.stringify(tuned));
    assert.ok(tuned[0]!.start >= 0.4 && tuned[0]!.start <= 0.9 && tuned[0]!.end >= 1.5 && tuned[0]!.end <= 2.3, JSON.stringify(tuned));
    const plain = await segments("1");
    assert.ok(plain.length >= 1, JSON.stringify(plain));
    assert.ok(plain.every((s) => s.start >= tuned[0]!.start - 1e-6 && s.end <= tuned[0]!.end + 1e-6), "version 1 cuts within version 2's segment");
  });

  test("the two versions differ as their settings say: hysteresis and a minimum length in version 2", async () => {
    const probabilities = [0.1, 0.9, 0.4, 0.9, 0.9, 0.2, 0.1, 0.6, 0.1, 0.1];
    const client = new Client(server.url);
    const cut = async (version: string) => {
      const response = await client.v2.infer("speech-segments", { inputs: [{ name: "probabilities", data: Float32Array.from(probabilities) }] }, { version });
      return response.outputs.map((o) => [...(o.data as Float32Array)].map((s) => Math.round(s * 1000)));
    };
    assert.deepEqual(await cut("1"), [[96, 288, 672], [192, 480, 768]]);
    assert.deepEqual(await cut("2"), [[96], [480]]);
    await assert.rejects(client.v2.infer("speech-segments", { parameters: { frame_seconds: -1 }, inputs: [{ name: "probabilities", data: Float32Array.of(0.5) }] }), { name: "HttpError", status: 400, message: /frame_seconds/ });
  });

  test("a recording shorter than Silero VAD's window is the client's 400, saying what the model found; a frame beside it is answered", async () => {
    const frame = (samples: number) =>
      post(`${server.url}/v2/models/silero-vad/infer`, {
        inputs: [
          { name: "input", datatype: "FP32", shape: [1, samples], data: new Array<number>(samples).fill(0) },
          { name: "sr", datatype: "INT64", shape: [], data: [16000] },
          { name: "h", datatype: "FP32", shape: [2, 1, 64], data: new Array<number>(128).fill(0) },
          { name: "c", datatype: "FP32", shape: [2, 1, 64], data: new Array<number>(128).fill(0) },
        ],
      });
    const [short, shorter, whole] = await Promise.all([frame(100), frame(10), frame(1536)]);
    const inputs = (n: number) => `inputs 'input' \\(float32 \\[1, ${n}\\]\\), 'sr' \\(int64 \\[\\]\\), 'h' \\(float32 \\[2, 1, 64\\]\\), 'c' \\(float32 \\[2, 1, 64\\]\\)`;
    assertError(short, 400, new RegExp(`^bad request: the model cannot run on ${inputs(100)}: Conv node 'Conv_132': Invalid input shape: \\{1\\}$`));
    assertError(shorter, 400, new RegExp(`^bad request: the model cannot run on ${inputs(10)}: Pad node 'Pad_63': Pad reflect: pre-pad \\(96\\) exceeds maximum allowed \\(9\\) for axis 3`));
    assert.equal(whole.status, 200, whole.text);
  });
});
