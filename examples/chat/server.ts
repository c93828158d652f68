/**
 * A real language model behind the OpenAI API: SmolLM2-135M-Instruct (GGUF Q4_1, 98 MB, fetched
 * by `npm run models -- smollm2`; made here on first start when it is missing), run by llama.cpp
 * with up to `SEQUENCES` (default 8) sequences decoded together, continuously batched.
 *
 *   node --import tsx examples/chat/server.ts [--port 8000 and the other server flags]
 *   curl -N localhost:8000/v1/chat/completions -d '{"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "What is the capital of France?"}], "stream": true}'
 *
 * Environment: `SEQUENCES` (sequences per worker), `THREADS` (CPU threads of the worker, default
 * all cores), `CONTEXT_SIZE` (tokens per sequence, default 2048), `CONTINUOUS=0` (request-level
 * batching instead, for comparison), `ISOLATION=thread` (a worker thread rather than a child process).
 */
import { Server } from "shoal";
import { llamaWorker } from "shoal/llama";
import { ensureModel } from "../../scripts/models/ensure-model.js";
import { SMOLLM2_FILE } from "../../scripts/models/smollm2.js";

/** The name clients give as `model`. */
const MODEL_NAME = "SmolLM2-135M-Instruct";

const { built, files } = await ensureModel("smollm2");
if (built) console.log(`fetched ${files[SMOLLM2_FILE]}`);
const sequences = Number(process.env.SEQUENCES ?? 8);
const SmolLM2 = llamaWorker({
  model: files[SMOLLM2_FILE]!,
  name: "SmolLM2",
  sequences,
  ...(process.env.THREADS === undefined ? {} : { threads: Number(process.env.THREADS) }),
  ...(process.env.CONTEXT_SIZE === undefined ? {} : { contextSize: Number(process.env.CONTEXT_SIZE) }),
});

const server = new Server();
// llama.cpp is native code: by default each worker is a child process, so that a crash there
// takes down the worker alone (the server starts another).
server.appendWorker(SmolLM2, {
  route: "/chat",
  maxActive: sequences,
  continuous: process.env.CONTINUOUS !== "0",
  maxBatchSize: sequences,
  isolation: process.env.ISOLATION === "thread" ? "thread" : "process",
});
server.openAI({ model: MODEL_NAME, route: "/chat" });
const address = await server.run();
if (address !== undefined) {
  const host = address.address === "0.0.0.0" || address.address === "::" ? "127.0.0.1" : address.address;
  console.log(
    `${MODEL_NAME} is serving. Try it:\n` +
      `  curl -N http://${host}:${address.port}/v1/chat/completions -d '{"model": "${MODEL_NAME}", "messages": [{"role": "user", "content": "What is the capital of France?"}], "stream": true}'`,
  );
}
