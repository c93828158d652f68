/**
 * Sentiment analysis with a real model: dracula-sentiment's character-level BiLSTM, converted to
 * ONNX by `npm run models` (made here on first start when it is missing).
 *
 *   node --import tsx examples/sentiment/server.ts [--port 8000 and the other server flags]
 *
 * - `POST /sentiment` `{"text": "..."}` → `{"label": "positive" | "negative", "score": 0..1}`
 * - the V2 model `sentiment`: input `text` BYTES [N] → `label` BYTES [N], `score` FP32 [N]
 */
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "shoal";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { Sentiment } from "./sentiment.js";

const { built, dir } = await ensureModel("sentiment");
if (built) console.log(`made the sentiment model in ${dir}`);

const server = new Server();
server.appendWorker(Sentiment, { num: 2, maxBatchSize: 32, maxWaitMs: 5, route: "/sentiment" });
server.addModel(
  {
    name: "sentiment",
    runtime: "./sentiment-model.ts",
    maxBatchSize: 32,
    maxWaitMs: 5,
    inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
    outputs: [
      { name: "label", datatype: "BYTES", shape: [-1] },
      { name: "score", datatype: "FP32", shape: [-1] },
    ],
  },
  dirname(fileURLToPath(import.meta.url)),
);
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(
    `Sentiment analysis is serving. Try it:\n` +
      `  curl -X POST http://${host}:${address.port}/sentiment -d '{"text": "I love this movie, it was wonderful"}'\n` +
      `  curl -X POST http://${host}:${address.port}/v2/models/sentiment/infer -d '{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["What a great day", "The food was awful"]}]}'`,
  );
}
