/**
 * A two-stage pipeline: a CPU stage with two workers reads and resamples the audio, and a
 * batched ONNX stage runs the Silero VAD model on it. The samples pass between the stages as a
 * Float32Array, moved between threads, never through JSON.
 *
 *   curl -X POST http://127.0.0.1:8000/vad -H 'content-type: audio/wav' --data-binary @examples/hello.wav
 */
import { Server } from "shoal";
import { AudioPrep, VoiceActivity } from "./vad/voice-activity.js";

const server = new Server();
server.appendWorker(AudioPrep, { num: 2, route: "/vad" });
server.appendWorker(VoiceActivity, { num: 1, maxBatchSize: 16, maxWaitMs: 5, route: "/vad" });
server.run();
