/**
 * examples/vad/speech-segments.ts: the speech segments of a long recording, yielded as they are
 * found while the audio is still arriving, stopped by an abort signal, the segmenter reusable.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { ValidationError } from "shoal";
import { ROOT } from "./helpers.js";
import { SpeechSegmenter, type SpeechSegment } from "../examples/vad/speech-segments.js";
import { readWav } from "../examples/vad/voice-activity.js";

describe("speech segments of a long recording, as they are found", () => {
  // examples/hello.wav: 2.7 s at 16 kHz, "Hello from Shoal." from about 0.6 s to 2.1 s.
  const hello = readWav(readFileSync(join(ROOT, "examples", "hello.wav"))).samples;
  const gap = new Float32Array(16000); // a second of silence
  const parts = [hello, gap, hello, gap, hello];
  const recording = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (recording.set(p, at), at + p.length), 0);
  const helloMs = (hello.length / 16000) * 1000;
  const offsets = [0, helloMs + 1000, 2 * (helloMs + 1000)];
  let segmenter: SpeechSegmenter;

  before(async () => {
    segmenter = await SpeechSegmenter.create();
  });

  const collect = async (segments: AsyncIterable<SpeechSegment>) => {
    const out: SpeechSegment[] = [];
    for await (const s of segments) out.push(s);
    return out;
  };

  const assertHellos = (segments: SpeechSegment[]) => {
    assert.equal(segments.length, 3, JSON.stringify(segments));
    segments.forEach(({ start, end }, i) => {
      const [from, to] = [start - offsets[i]!, end - offsets[i]!];
      assert.ok(from >= 300 && from <= 900 && to >= 1500 && to <= 2700, `segment ${i}: ${start}–${end} ms, ${from}–${to} ms into its hello`);
    });
  };

  test("yields each segment while the audio is still arriving, in order, where the speech is", async () => {
    const chunk = 8000; // half a second
    let requested = 0;
    async function* upload() {
      for (let at = 0; at < recording.length; at += chunk) {
        requested++;
        yield recording.subarray(at, at + chunk);
      }
    }
    const arrivals: number[] = [];
    const segments: SpeechSegment[] = [];
    for await (const s of segmenter.segments(upload(), 16000)) {
      segments.push(s);
      arrivals.push(requested);
    }
    assertHellos(segments);
    const total = Math.ceil(recording.length / chunk);
    assert.equal(requested, total);
    // A segment comes once its speech and a few frames of silence after it have arrived.
    assert.ok(arrivals[0]! <= Math.ceil((segments[0]!.end + 1000) / 500), `first segment after ${arrivals[0]} of ${total} chunks`);
    assert.ok(arrivals[1]! < total, `second segment after ${arrivals[1]} of ${total} chunks`);
  });

  test("a whole recording at another rate gives the same segments", async () => {
    assertHellos(await collect(segmenter.segments(recording, 16000)));
    // 48 kHz: each sample three times.
    const upsampled = Float32Array.from({ length: recording.length * 3 }, (_, i) => recording[Math.floor(i / 3)]!);
    assertHellos(await collect(segmenter.segments(upsampled, 48000)));
  });

  test("an abort stops the reading between two frames; the segmenter then reads the next recording afresh", async () => {
    const controller = new AbortController();
    const segments = segmenter.segments(recording, 16000, controller.signal);
    const first = await segments.next();
    assert.equal(first.done, false);
    controller.abort(new Error("client gone"));
    await assert.rejects(segments.next(), /client gone/);
    // Stopped in the middle of a recording, and also by leaving the loop.
    for await (const _ of segmenter.segments(recording, 16000)) break;
    assertHellos(await collect(segmenter.segments(recording, 16000)));
  });

  test("audio below 16 kHz, and a second recording at once, are refused", async () => {
    await assert.rejects(collect(segmenter.segments(recording, 8000)), (err: Error) => err instanceof ValidationError && /16000 Hz or more/.test(err.message));
    const reading = segmenter.segments(recording, 16000);
    await reading.next();
    await assert.rejects(collect(segmenter.segments(recording, 16000)), /reading another recording/);
    await reading.return(undefined);
    assertHellos(await collect(segmenter.segments(recording, 16000)));
  });
});
