/**
 * Baseline of the model scenario: a node:http server running an ONNX model inline, one request per
 * onnxruntime call (no batching, no worker thread), with the same JSON contract as `shoal serve`:
 * {"input": [[...row...], ...]} -> {"output": [[...], ...]}.
 *
 *   node --import tsx bench/servers/plain-onnx.ts --model bench/.cache/mlp-big.onnx --port 8001 --intra-op-threads 2
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import ort from "onnxruntime-node";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    port: { type: "string", default: "8001" },
    address: { type: "string", default: "127.0.0.1" },
    "intra-op-threads": { type: "string", default: "2" },
  },
});
if (values.model === undefined) throw new Error("--model is required");

const session = await ort.InferenceSession.create(values.model, {
  intraOpNumThreads: Number(values["intra-op-threads"]),
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
});
const inputName = session.inputNames[0]!;
const outputName = session.outputNames[0]!;

function send(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function infer(rows: number[][]): Promise<number[][]> {
  const width = rows[0]!.length;
  const data = new Float32Array(rows.length * width);
  rows.forEach((row, i) => data.set(row, i * width));
  const out = (await session.run({ [inputName]: new ort.Tensor("float32", data, [rows.length, width]) }))[outputName]!;
  const cols = out.dims[1]!;
  const flat = out.data as Float32Array;
  return rows.map((_, i) => Array.from(flat.subarray(i * cols, (i + 1) * cols)));
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    let rows: unknown;
    try {
      rows = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { input?: unknown }).input;
    } catch {
      send(res, 400, { error: "invalid JSON" });
      return;
    }
    if (!Array.isArray(rows) || rows.length === 0 || !rows.every(Array.isArray)) {
      send(res, 422, { error: "expected {\"input\": [[numbers]]}" });
      return;
    }
    infer(rows as number[][]).then(
      (output) => send(res, 200, { output }),
      (err: Error) => send(res, 422, { error: err.message }),
    );
  });
});

server.listen(Number(values.port), values.address);
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
