/**
 * Image classification with a real model: EfficientNet-Lite0 trained on ImageNet-1k, converted to
 * ONNX by `npm run models` (made here on first start when it is missing).
 *
 *   node --import tsx examples/image-classification/server.ts [--port 8000 and the other server flags]
 *
 * - `POST /classify` with a JPEG or PNG body → `{"top": [{"label", "score"}, ...]}`, the 5 most
 *   likely classes (`?k=` for another number): a CPU stage of two workers decodes and prepares
 *   each image with sharp, and a batched ONNX stage of two workers classifies them together.
 * - the V2 model `efficientnet-lite0` (models/efficientnet-lite0/): image tensors in, `probs` out.
 */
import { Server } from "shoal";
import { fileURLToPath } from "node:url";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { Classifier } from "./classifier.js";
import { ImagePrep } from "./image-prep.js";

const { built, dir } = await ensureModel("efficientnet-lite0");
if (built) console.log(`made the image model in ${dir}`);

const server = new Server();
server.appendWorker(ImagePrep, { num: 2, route: "/classify" });
// Two sessions of one thread each (OnnxWorker shares the cores out): one session of two threads,
// beside the busy CPU stage, waits for its second thread at every operator, and runs at half speed.
server.appendWorker(Classifier, { num: 2, maxBatchSize: 16, maxWaitMs: 5, route: "/classify" });
server.addModelRepository(fileURLToPath(new URL("models", import.meta.url)));
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(`Image classification is serving. Try it:\n  curl -X POST 'http://${host}:${address.port}/classify?k=3' --data-binary @node_modules/deeplearn-squeezenet/cat.jpg`);
}
