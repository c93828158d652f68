/**
 * The default server, `npm start` (examples/vad-server.ts): Silero VAD from an npm package,
 * started as users start it, answering the curl command it prints.
 */
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { ROOT, assertError, post, send, waitFor } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

const run = promisify(execFile);

describe("npm start: the Silero VAD server", () => {
  let npm: ChildProcess;
  let output = "";
  let curl = "";
  let url = "";

  before(async () => {
    // A process group of its own, so that the signal that stops npm reaches the server too.
    npm = spawn("npm", ["start", "--", "--port", "0", "--address", "127.0.0.1"], { cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    npm.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    npm.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    curl = await waitFor("the printed curl command", () => output.match(/^\s+(curl .*)$/m)?.[1], 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${output}`);
    });
    url = curl.match(/(http:\/\/\S+)\/vad/)![1]!;
  });
  after(async () => {
    if (npm?.pid === undefined || npm.exitCode !== null) return;
    const exited = new Promise((resolve) => npm.once("exit", resolve));
    process.kill(-npm.pid, "SIGTERM");
    await exited;
  });

  test("the printed curl command finds the speech in examples/hello.wav", async () => {
    assert.match(curl, /^curl -X POST http:\/\/127\.0\.0\.1:\d+\/vad -H 'content-type: audio\/wav' --data-binary @examples\/hello\.wav$/);
    const { stdout } = await run("sh", ["-c", `${curl} --silent --show-error --fail`], { cwd: ROOT });
    const answer = JSON.parse(stdout) as { frameSeconds: number; probabilities: number[]; speech: { start: number; end: number }[] };
    assert.equal(answer.frameSeconds, 0.096);
    // 2.7 s of audio: 0.6 s of silence, "Hello from Shoal." for 1.5 s, 0.6 s of silence.
    assert.equal(answer.probabilities.length, 29);
    assert.equal(answer.speech.length, 1, stdout);
    const [{ start, end }] = answer.speech as [{ start: number; end: number }];
    assert.ok(start >= 0.4 && start <= 0.9 && end >= 1.5 && end <= 2.3, `speech from ${start} to ${end} s`);
    assert.ok(Math.max(...answer.probabilities.slice(0, 4)) < 0.1, "silence at the start");
  });

  test("JSON samples at 8 kHz are served too, and a bad body is a 422", async () => {
    const reply = await post(`${url}/vad`, { audio: new Array(2000).fill(0), sampleRate: 8000 });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.probabilities.length, 3);
    assert.deepEqual(reply.json.speech, []);
    assertError(await post(`${url}/vad`, { audio: [1, 2], sampleRate: 44100 }), 422, /'sampleRate' must be 8000 or 16000/);
    assertError(await post(`${url}/vad`, "not a wav", { "content-type": "audio/wav" }), 422, "request validation error: the body is not a WAV file");
  });

  test("concurrent requests are stepped through the model together", async () => {
    const wav = readFileSync(join(ROOT, "examples", "hello.wav"));
    const before = await batchSizes(url, "VoiceActivity_1");
    const replies = await Promise.all(
      Array.from({ length: 16 }, () => send(`${url}/vad`, { method: "POST", body: wav, headers: { "content-type": "audio/wav" } })),
    );
    const first = replies[0]!.json;
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      // The same audio gets the same answer, whatever it was batched with (up to rounding).
      assert.deepEqual(reply.json.speech, first.speech);
      reply.json.probabilities.forEach((p: number, t: number) => assert.ok(Math.abs(p - first.probabilities[t]) < 1e-3, `frame ${t}: ${p}`));
    }
    const after = await batchSizes(url, "VoiceActivity_1");
    assert.ok(after.batches - before.batches < 16, `16 requests took ${after.batches - before.batches} batches`);
  });
});
