/**
 * Voice activity detection that streams: each speech segment of an uploaded recording is sent as
 * soon as the model has found its end, while the rest of the recording is still being processed.
 * The Silero VAD model is recurrent (each 96 ms frame's state feeds the next), so it is served as
 * a StepWorker: one step runs the next frame of every recording under way in one batch, and a
 * recording that arrives meanwhile joins at the next step instead of waiting for the others to
 * finish (continuous batching, as for a text generator's tokens).
 */
import { StepWorker, type RequestMeta, type StepResult } from "shoal";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { decodeAudio, FRAME_SECONDS, MODEL, seconds, STATE_SIZE, THRESHOLD, toAudio, type Audio } from "./voice-activity.js";

/** One recording under way. */
interface Recording {
  audio: Audio;
  /** Samples per frame at its rate. */
  frame: number;
  /** The next frame to run. */
  t: number;
  frames: number;
  h: Float32Array;
  c: Float32Array;
  /** Where the speech segment under way started, in frames. */
  speechFrom: number | undefined;
}

/** A chunk of the stream: one speech segment, in seconds from the start of the recording. */
export interface Segment {
  start: number;
  end: number;
}

export class SpeechSegments extends StepWorker<Audio, Recording, Segment> {
  #session!: InferenceSession;
  #ort!: typeof import("onnxruntime-node");

  override async init(): Promise<void> {
    // Imported here, not at the top: the server's own thread loads this module too, and never computes.
    this.#ort = await import("onnxruntime-node");
    this.#session = await this.#ort.InferenceSession.create(MODEL, { intraOpNumThreads: 1 });
  }

  override decode(body: Uint8Array, meta?: RequestMeta): unknown {
    return toAudio(decodeAudio(body, meta));
  }

  join(audios: Audio[]): Recording[] {
    return audios.map((audio) => {
      const frame = Math.round(audio.sampleRate * FRAME_SECONDS);
      return { audio, frame, t: 0, frames: Math.ceil(audio.samples.length / frame), h: new Float32Array(STATE_SIZE), c: new Float32Array(STATE_SIZE), speechFrom: undefined };
    });
  }

  // The next frame of every recording, one run per sample rate (the model's `sr` is a scalar).
  async step(active: Recording[]): Promise<StepResult<Segment>[]> {
    const results: StepResult<Segment>[] = active.map(() => ({}));
    for (const rate of [8000, 16000]) {
      const rows = active.flatMap((rec, i) => (rec.audio.sampleRate === rate ? [i] : []));
      if (rows.length > 0) await this.#run(rows.map((i) => active[i]!), rate, rows.map((i) => results[i]!));
    }
    return results;
  }

  async #run(recordings: Recording[], rate: number, results: StepResult<Segment>[]): Promise<void> {
    const ort = this.#ort;
    const n = recordings.length;
    const frame = recordings[0]!.frame;
    const input = new Float32Array(n * frame);
    const h = new Float32Array(n * STATE_SIZE);
    const c = new Float32Array(n * STATE_SIZE);
    recordings.forEach((rec, row) => {
      input.set(rec.audio.samples.subarray(rec.t * frame, (rec.t + 1) * frame), row * frame);
      // The state is [2, batch, 64]: each recording's two layers go to its row of each.
      for (const layer of [0, 1]) {
        h.set(rec.h.subarray(layer * 64, layer * 64 + 64), (layer * n + row) * 64);
        c.set(rec.c.subarray(layer * 64, layer * 64 + 64), (layer * n + row) * 64);
      }
    });
    const out = await this.#session.run({
      input: new ort.Tensor("float32", input, [n, frame]),
      sr: new ort.Tensor("int64", BigInt64Array.of(BigInt(rate)), []),
      h: new ort.Tensor("float32", h, [2, n, 64]),
      c: new ort.Tensor("float32", c, [2, n, 64]),
    });
    const probability = out.output!.data as Float32Array;
    const [hn, cn] = [out.hn as Tensor, out.cn as Tensor].map((t) => t.data as Float32Array);
    recordings.forEach((rec, row) => {
      for (const layer of [0, 1]) {
        rec.h.set(hn!.subarray((layer * n + row) * 64, (layer * n + row + 1) * 64), layer * 64);
        rec.c.set(cn!.subarray((layer * n + row) * 64, (layer * n + row + 1) * 64), layer * 64);
      }
      const speech = probability[row]! >= THRESHOLD;
      const t = rec.t++;
      const result = results[row]!;
      if (speech && rec.speechFrom === undefined) rec.speechFrom = t;
      // A segment ends at the first silent frame, or with the recording.
      const ended = rec.speechFrom !== undefined && (!speech || rec.t === rec.frames);
      if (ended) {
        result.chunk = { start: seconds(rec.speechFrom!), end: seconds(speech ? rec.t : t) };
        rec.speechFrom = undefined;
      }
      result.done = rec.t === rec.frames;
    });
  }
}
