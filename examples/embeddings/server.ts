/**
 * Sentence embeddings with a real model: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions), fetched
 * by `npm run models` (made here on first start when it is missing).
 *
 *   node --import tsx examples/embeddings/server.ts [--port 8000 and the other server flags]
 *
 * - `POST /v1/embeddings` (OpenAI's API, the model `all-MiniLM-L6-v2`): `input` a text, a list of
 *   texts or of token-id lists; `encoding_format` float or base64
 * - the V2 model `all-MiniLM-L6-v2`: input `text` BYTES [N] → `embedding` FP32 [N, 384]
 */
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "shoal";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { Embeddings } from "./embeddings.js";
import { DIMENSIONS, MODEL_NAME } from "./minilm.js";

const { built, dir } = await ensureModel("minilm");
if (built) console.log(`made the minilm model in ${dir}`);

const server = new Server();
server.appendWorker(Embeddings, { num: 2, maxBatchSize: 32, maxWaitMs: 5, route: "/embeddings" });
server.openAI({ model: MODEL_NAME, route: "/embeddings", kind: "embeddings" });
server.addModel(
  {
    name: MODEL_NAME,
    runtime: "./embeddings-model.ts",
    maxBatchSize: 32,
    maxWaitMs: 5,
    inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
    outputs: [{ name: "embedding", datatype: "FP32", shape: [-1, DIMENSIONS] }],
  },
  dirname(fileURLToPath(import.meta.url)),
);
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(
    `Sentence embeddings are serving. Try it:\n` +
      `  curl http://${host}:${address.port}/v1/embeddings -d '{"model": "${MODEL_NAME}", "input": ["A cat sits on the mat.", "A kitten is resting on a rug."]}'\n` +
      `  curl -X POST http://${host}:${address.port}/v2/models/${MODEL_NAME}/infer -d '{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["Fish swim in shoals"]}]}'`,
  );
}
