/**
 * The least a batching Node server can do for the model scenario, as a reference for Shoal's
 * overhead: node:http on the main thread, a queue, and `--sessions` worker threads each with its
 * own onnxruntime session, fed batches of up to `--batch` requests (waiting at most
 * `--max-wait-ms` for a batch to fill). No validation, metrics, deadlines or errors worth the
 * name: MessagePack bodies in Shoal's binary tensor layout only
 * (`{"input": {"data": <float32 bytes>, "shape": [1, n], "type": "float32"}}`), answered likewise.
 * Plain JavaScript: Node 20 does not carry tsx's loader into worker threads.
 *
 *   node bench/servers/bare-batched.mjs --model bench/.cache/mlp-big.onnx --port 8002 --batch 32 --sessions 2 --threads 1
 */
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { pack, unpack } from "msgpackr";
import ort from "onnxruntime-node";

if (isMainThread) {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      port: { type: "string", default: "8002" },
      address: { type: "string", default: "127.0.0.1" },
      batch: { type: "string", default: "32" },
      sessions: { type: "string", default: "2" },
      threads: { type: "string", default: "1" },
      "max-wait-ms": { type: "string", default: "5" },
    },
  });
  if (values.model === undefined) throw new Error("--model is required");
  const maxBatch = Number(values.batch);
  const maxWaitMs = Number(values["max-wait-ms"]);
  /** @type {{body: Uint8Array, res: import("node:http").ServerResponse, at: number}[]} */
  const queue = [];
  /** @type {Worker[]} */
  const idle = [];
  /** @type {Map<Worker, typeof queue>} */
  const running = new Map();
  let timer;

  const pump = () => {
    clearTimeout(timer);
    timer = undefined;
    while (idle.length > 0 && queue.length > 0) {
      const waited = performance.now() - queue[0].at;
      if (queue.length < maxBatch && waited < maxWaitMs) {
        timer = setTimeout(pump, maxWaitMs - waited);
        return;
      }
      const worker = idle.pop();
      const batch = queue.splice(0, maxBatch);
      running.set(worker, batch);
      worker.postMessage(batch.map((r) => r.body), batch.map((r) => r.body.buffer));
    }
  };

  const job = { model: values.model, threads: Number(values.threads) };
  const workers = Array.from({ length: Number(values.sessions) }, () => new Worker(new URL(import.meta.url), { workerData: job }));
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once("message", resolve))));
  for (const worker of workers) {
    worker.on("message", (/** @type {Uint8Array[]} */ answers) => {
      const batch = running.get(worker);
      running.delete(worker);
      idle.push(worker);
      pump();
      answers.forEach((body, i) => {
        const { res } = batch[i];
        res.writeHead(200, { "content-type": "application/msgpack", "content-length": body.byteLength });
        res.end(body);
      });
    });
    idle.push(worker);
  }

  // It listens once every session is loaded, so any answer says it is ready: other paths get 404.
  const server = createServer((req, res) => {
    if (req.url !== "/inference") {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      // A buffer of its own, so that it can move to the worker.
      const body = new Uint8Array(Buffer.concat(chunks));
      queue.push({ body, res, at: performance.now() });
      pump();
    });
  });
  server.listen(Number(values.port), values.address);
  // Ending a thread inside a session's run aborts the process: exit once no batch is running.
  const stop = () => {
    server.close();
    server.closeAllConnections();
    const exit = () => (running.size === 0 ? process.exit(0) : setTimeout(exit, 10));
    exit();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
} else {
  const { model, threads } = workerData;
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential", graphOptimizationLevel: "all" });
  const inputName = session.inputNames[0];
  const outputName = session.outputNames[0];
  const width = Number(session.inputMetadata[0].shape[1]);
  parentPort.postMessage("ready");
  parentPort.on("message", async (/** @type {Uint8Array[]} */ bodies) => {
    const data = new Float32Array(bodies.length * width);
    bodies.forEach((body, i) => {
      const bytes = unpack(body).input.data;
      data.set(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)), i * width);
    });
    const out = (await session.run({ [inputName]: new ort.Tensor("float32", data, [bodies.length, width]) }))[outputName];
    const cols = out.dims[1];
    const flat = out.data;
    const answers = bodies.map((_, i) => {
      const row = new Uint8Array(flat.buffer, flat.byteOffset + i * cols * 4, cols * 4);
      return new Uint8Array(pack({ output: { data: row, shape: [1, cols], type: "float32" } }));
    });
    parentPort.postMessage(answers, answers.map((a) => a.buffer));
  });
}
