/**
 * A model only Python has at hand, served by a Python stage, and the same model exported to ONNX
 * served by a TypeScript stage: scikit-learn's handwritten digits (digits.py).
 *
 *   SHOAL_PYTHON=/path/to/venv/bin/python node --import tsx examples/digits/server.ts [server flags]
 *
 * The Python needs the SDK (`pip install ./python`), scikit-learn and skl2onnx
 * (python/requirements-test.txt pins them). On first start it trains and exports the model.
 * - `POST /digits` `{"pixels": [64 numbers, 0 to 16]}` → `{"digit", "score", "probabilities"}`, in Python
 * - `POST /digits-onnx`, the same from the exported model in onnxruntime-node
 */
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Server, python } from "shoal";
import { DigitsOnnx } from "./digits-onnx.js";
import { PYTHON, ensureExported, modelFile } from "./model-files.js";

if (ensureExported()) console.log(`trained and exported the digits model to ${modelFile()}`);

const server = new Server();
server.appendWorker(python("digits.py:Digits", { interpreter: PYTHON, cwd: dirname(fileURLToPath(import.meta.url)) }), { maxBatchSize: 32, maxWaitMs: 5, route: "/digits" });
server.appendWorker(DigitsOnnx, { maxBatchSize: 32, maxWaitMs: 5, route: "/digits-onnx" });
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  const zero = JSON.stringify({ pixels: [0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0, 0, 3, 15, 2, 0, 11, 8, 0, 0, 4, 12, 0, 0, 8, 8, 0, 0, 5, 8, 0, 0, 9, 8, 0, 0, 4, 11, 0, 1, 12, 7, 0, 0, 2, 14, 5, 10, 12, 0, 0, 0, 0, 6, 13, 10, 0, 0, 0] });
  console.log(`Digits are serving. Try it:\n  curl -X POST http://${host}:${address.port}/digits -d '${zero}'\n  curl -X POST http://${host}:${address.port}/digits-onnx -d '${zero}'`);
}
