/**
 * Speech segments from Silero VAD's per-frame probabilities of speech: the runs of frames that
 * are speech, as start and end times in seconds. Each version folder holds its `segments.json`:
 * version 1 cuts at one threshold; version 2 adds hysteresis (a run ends only below a lower
 * threshold) and drops runs shorter than a minimum, as a tuned post-processing step would.
 *
 * Plain JavaScript (ES module), so that it runs in the container image, which has no TypeScript
 * loader; `shoal` resolves there too.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ClientError, ModelWorker } from "shoal";

export default class SpeechSegments extends ModelWorker {
  /** @type {{ threshold: number, negativeThreshold?: number, minSpeechSeconds?: number }} */
  config = { threshold: 0.5 };

  init() {
    this.config = JSON.parse(readFileSync(join(this.dir, "segments.json"), "utf8"));
  }

  /** @param {import("shoal").ModelInput} request */
  forward({ inputs, parameters }) {
    const probabilities = inputs.probabilities.data;
    const frameSeconds = Number(parameters.frame_seconds ?? 0.096);
    if (!(frameSeconds > 0)) throw new ClientError("the parameter frame_seconds must be a positive number of seconds");
    const { threshold, negativeThreshold = threshold, minSpeechSeconds = 0 } = this.config;
    const starts = [];
    const ends = [];
    let start = -1;
    const close = (frame) => {
      if ((frame - start) * frameSeconds >= minSpeechSeconds) {
        starts.push(start * frameSeconds);
        ends.push(frame * frameSeconds);
      }
      start = -1;
    };
    probabilities.forEach((p, frame) => {
      if (start < 0 && p >= threshold) start = frame;
      else if (start >= 0 && p < negativeThreshold) close(frame);
    });
    if (start >= 0) close(probabilities.length);
    return {
      start: { datatype: "FP32", shape: [starts.length], data: Float32Array.from(starts) },
      end: { datatype: "FP32", shape: [ends.length], data: Float32Array.from(ends) },
    };
  }
}
