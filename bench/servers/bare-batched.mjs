/**
 * The least a batching server can do for the model scenario, as a reference for Shoal's overhead:
 * the runtime's own HTTP server on the main thread (node:http on Node, `Bun.serve` on Bun), a
 * queue, and `--sessions` worker threads each with its own onnxruntime session, fed batches of up
 * to `--batch` requests (waiting at most `--max-wait-ms` for a batch to fill). No validation,
 * metrics, deadlines or errors worth the name: MessagePack bodies in Shoal's binary tensor layout
 * only (`{"input": {"data": <float32 bytes>, "shape": [1, n], "type": "float32"}}`), answered
 * likewise. Both fronts share the queue, the batching and the workers, so that the two runtimes'
 * figures differ by their HTTP servers alone.
 * Plain JavaScript: Node 20 does not carry tsx's loader into worker threads.
 *
 *   node bench/servers/bare-batched.mjs --model bench/.cache/mlp-big.onnx --port 8002 --batch 32 --sessions 2 --threads 1
 *   bun bench/servers/bare-batched.mjs --model bench/.cache/mlp-big.onnx --port 8002 --batch 32 --sessions 2 --threads 1
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
  /** @type {{body: Uint8Array, reply: (answer: Uint8Array) => void, at: number}[]} */
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
      answers.forEach((body, i) => batch[i].reply(body));
    });
    idle.push(worker);
  }

  /** Queues one request's body; `reply` sends its answer. */
  const enqueue = (/** @type {Uint8Array} */ body, /** @type {(answer: Uint8Array) => void} */ reply) => {
    queue.push({ body, reply, at: performance.now() });
    pump();
  };
  // It listens once every session is loaded, so any answer says it is ready: other paths get 404.
  const close = typeof Bun === "undefined" ? listenNode(values, enqueue) : listenBun(values, enqueue);
  // Ending a thread inside a session's run aborts the process: exit once no batch is running.
  const stop = () => {
    close();
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

/**
 * The node:http front: reads each body to the end and queues it. Returns what closes the server.
 * @param {{port: string, address: string}} at
 * @param {(body: Uint8Array, reply: (answer: Uint8Array) => void) => void} enqueue
 */
function listenNode(at, enqueue) {
  const server = createServer((req, res) => {
    if (req.url !== "/inference") {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      // A buffer of its own, so that it can move to the worker.
      enqueue(new Uint8Array(Buffer.concat(chunks)), (answer) => {
        res.writeHead(200, { "content-type": "application/msgpack", "content-length": answer.byteLength });
        res.end(answer);
      });
    });
  });
  server.listen(Number(at.port), at.address);
  return () => {
    server.close();
    server.closeAllConnections();
  };
}

/**
 * The `Bun.serve` front: the same, each answer a Response resolved when its batch comes back.
 * @param {{port: string, address: string}} at
 * @param {(body: Uint8Array, reply: (answer: Uint8Array) => void) => void} enqueue
 */
function listenBun(at, enqueue) {
  const headers = { "content-type": "application/msgpack" };
  const server = Bun.serve({
    port: Number(at.port),
    hostname: at.address,
    routes: {
      "/inference": async (req) => {
        // An ArrayBuffer of its own, so that it can move to the worker.
        const body = new Uint8Array(await req.arrayBuffer());
        return new Promise((resolve) => enqueue(body, (answer) => resolve(new Response(answer, { headers }))));
      },
    },
    fetch: () => new Response(null, { status: 404 }),
  });
  return () => server.stop(true);
}
