/**
 * Baseline of the embeddings scenario: a node:http server running all-MiniLM-L6-v2 inline, one
 * onnxruntime call per request (no batching, no worker thread), with the same tokenizer, pooling
 * and graph as examples/embeddings (examples/embeddings/minilm.ts), answering
 * `POST /v1/embeddings` `{"model", "input": text | [texts]}` in OpenAI's float shape.
 *
 *   node --import tsx bench/servers/plain-embeddings.ts --port 8001 --intra-op-threads 2
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import ort from "onnxruntime-node";
import { MiniLmTokenizer, embed, modelFiles } from "../../examples/embeddings/minilm.js";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8001" },
    address: { type: "string", default: "127.0.0.1" },
    "intra-op-threads": { type: "string", default: "2" },
  },
});

const session = await ort.InferenceSession.create(modelFiles().model, {
  intraOpNumThreads: Number(values["intra-op-threads"]),
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
});
const tokenizer = new MiniLmTokenizer();

function send(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function answer(body: { model?: unknown; input?: unknown }): Promise<unknown> {
  const texts = typeof body.input === "string" ? [body.input] : body.input;
  if (!Array.isArray(texts) || texts.length === 0 || !texts.every((t) => typeof t === "string" && t !== "")) throw new Error("expected input: a text or a list of texts");
  const ids = texts.map((t: string) => tokenizer.encode(t));
  const vectors = await embed(ids, async (feeds) => {
    const inputs: Record<string, ort.Tensor> = {};
    for (const [name, { type, shape, data }] of Object.entries(feeds)) inputs[name] = new ort.Tensor(type, data, shape);
    const { last_hidden_state: out } = await session.run(inputs);
    return { last_hidden_state: { type: "float32", shape: [...out!.dims], data: out!.data as Float32Array<ArrayBuffer> } };
  });
  const tokens = ids.reduce((n, t) => n + t.length, 0);
  return { object: "list", data: vectors.map((v, index) => ({ object: "embedding", index, embedding: Array.from(v) })), model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    let body: { model?: unknown; input?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
    } catch {
      send(res, 400, { error: "invalid JSON" });
      return;
    }
    answer(body).then(
      (value) => send(res, 200, value),
      (err: Error) => send(res, 400, { error: err.message }),
    );
  });
});

server.listen(Number(values.port), values.address);
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
