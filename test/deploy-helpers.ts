/** Shared by the deployment tests: the example model repository, and talking to it. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, post } from "./helpers.js";

/** The example repository, as the README serves it. */
export const EXAMPLE_MODELS = join(ROOT, "examples", "models");

const FRAME = 1536; // 96 ms at 16 kHz

/** examples/hello.wav (16-bit mono PCM at 16 kHz) as samples in [-1, 1]. */
export function helloSamples(): Float32Array {
  const wav = readFileSync(join(ROOT, "examples", "hello.wav"));
  const data = wav.indexOf("data") + 8;
  const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset + data, wav.byteOffset + wav.length - ((wav.length - data) % 2)));
  return Float32Array.from(pcm, (s) => s / 32768);
}

/**
 * Silero VAD's probability of speech in each 96 ms frame of `samples`, one V2 request a frame,
 * each carrying the state (`hn`, `cn`) the previous one returned.
 */
export async function speechProbabilities(url: string, samples: Float32Array): Promise<number[]> {
  const probabilities: number[] = [];
  let h = new Array<number>(128).fill(0);
  let c = new Array<number>(128).fill(0);
  for (let at = 0; at < samples.length; at += FRAME) {
    const frame = new Array<number>(FRAME).fill(0);
    samples.subarray(at, at + FRAME).forEach((s, i) => (frame[i] = s));
    const reply = await post(`${url}/v2/models/silero-vad/infer`, {
      inputs: [
        { name: "input", datatype: "FP32", shape: [1, FRAME], data: frame },
        { name: "sr", datatype: "INT64", shape: [], data: [16000] },
        { name: "h", datatype: "FP32", shape: [2, 1, 64], data: h },
        { name: "c", datatype: "FP32", shape: [2, 1, 64], data: c },
      ],
    });
    assert.equal(reply.status, 200, reply.text);
    const outputs = Object.fromEntries((reply.json.outputs as { name: string; data: number[] }[]).map((o) => [o.name, o.data]));
    probabilities.push(outputs.output![0]!);
    h = outputs.hn!;
    c = outputs.cn!;
  }
  return probabilities;
}

