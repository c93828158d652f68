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

  test("/vad/stream sends each speech segment as an event, the same segments as /vad", async () => {
    const wav = readFileSync(join(ROOT, "examples", "hello.wav"));
    const whole = (await send(`${url}/vad`, { method: "POST", body: wav, headers: { "content-type": "audio/wav" } })).json;
    const streamed = await send(`${url}/vad/stream`, { method: "POST", body: wav, headers: { "content-type": "audio/wav" } });
    assert.equal(streamed.status, 200);
    assert.match(streamed.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.deepEqual(sseData(streamed.text), whole.speech);
  });

  test("a long recording's segments come in order, while short recordings joining meanwhile finish on their own", async () => {
    const hello = readFileSync(join(ROOT, "examples", "hello.wav"));
    const long = repeatedWav(hello, 12);
    const done: string[] = [];
    const longOne = send(`${url}/vad/stream`, { method: "POST", body: long, headers: { "content-type": "audio/wav" } }).then((r) => (done.push("long"), r));
    const shortOnes = Array.from({ length: 6 }, () => send(`${url}/vad/stream`, { method: "POST", body: hello, headers: { "content-type": "audio/wav" } }).then((r) => (done.push("short"), r)));
    const [longReply, ...shortReplies] = await Promise.all([longOne, ...shortOnes]);
    const segments = sseData(longReply!.text) as { start: number; end: number }[];
    assert.equal(segments.length, 12, longReply!.text);
    segments.forEach((s, i) => assert.ok(s.start >= 2.6 * i && s.end <= 2.8 * (i + 1) && s.start < s.end, `segment ${i}: ${JSON.stringify(s)}`));
    for (const reply of shortReplies) assert.equal((sseData(reply.text) as unknown[]).length, 1);
    // The short recordings joined the long one's steps instead of waiting for it to end.
    assert.equal(done.at(-1), "long", done.join(", "));
  });
});

// The data of each Server-Sent Event, parsed.
function sseData(body: string): unknown[] {
  return body
    .split("\n\n")
    .filter((event) => event.startsWith("data: "))
    .map((event) => JSON.parse(event.slice("data: ".length)));
}

// A WAV file whose samples are those of `wav` `times` over (its data chunk repeated, its sizes fixed).
function repeatedWav(wav: Buffer, times: number): Buffer {
  const at = wav.indexOf("data");
  const size = wav.readUInt32LE(at + 4);
  const data = wav.subarray(at + 8, at + 8 + size);
  const head = Buffer.from(wav.subarray(0, at + 8));
  head.writeUInt32LE(size * times, at + 4);
  head.writeUInt32LE(head.length - 8 + size * times, 4);
  return Buffer.concat([head, ...Array.from({ length: times }, () => data)]);
}
