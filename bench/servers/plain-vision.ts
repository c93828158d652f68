/**
 * Baseline of the vision scenario: a node:http server that prepares each image with sharp as the
 * example's ImagePrep stage does and runs EfficientNet-Lite0 on it alone, one onnxruntime-node
 * call per request (no batching, no worker thread, one session of --intra-op-threads threads).
 * The body is the JPEG or PNG; the answer `{"top": [{"label", "score"} × 5]}`, as /classify's.
 *
 *   node --import tsx bench/servers/plain-vision.ts --port 8001 --intra-op-threads 2
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import ort from "onnxruntime-node";
import sharp from "sharp";
import { preparePixels, sniff } from "../../examples/image-classification/image-prep.js";
import { SIDE, modelFiles, readLabels, topK } from "../../examples/image-classification/imagenet.js";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8001" },
    address: { type: "string", default: "127.0.0.1" },
    "intra-op-threads": { type: "string", default: "2" },
  },
});

sharp.cache(false);
const session = await ort.InferenceSession.create(modelFiles().model, {
  intraOpNumThreads: Number(values["intra-op-threads"]),
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
});
const labels = readLabels();

function send(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function classify(image: Uint8Array): Promise<unknown> {
  const format = sniff(image);
  if (format === undefined) throw new Error("the body is not a JPEG or PNG image");
  const pixels = await preparePixels(sharp, image, format);
  const { probs } = await session.run({ input: new ort.Tensor("float32", pixels, [1, 3, SIDE, SIDE]) });
  return { top: topK(probs!.data as Float32Array, 5, labels) };
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    classify(Buffer.concat(chunks)).then(
      (answer) => send(res, 200, answer),
      (err: Error) => send(res, 422, { error: err.message }),
    );
  });
});

server.listen(Number(values.port), values.address);
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
