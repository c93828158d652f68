/**
 * A text generator behind the OpenAI API: the tiny decoder of this folder (a random stand-in that
 * writes gibberish; see README.md for a real model) on `/generate`, batched continuously (up to
 * 16 sequences at once), and served as the model `tiny-gpt` on `/v1/completions`,
 * `/v1/chat/completions` and `/v1/models`.
 *
 *   node --import tsx examples/generate/server.ts
 *   curl -N localhost:8000/v1/chat/completions -d '{"model": "tiny-gpt", "messages": [{"role": "user", "content": "Hi"}], "stream": true}'
 */
import { Server } from "shoal";
import { TinyGpt } from "./gpt-worker.js";

const server = new Server();
server.appendWorker(TinyGpt, { route: "/generate", maxActive: 16 });
server.openAI({ model: "tiny-gpt", route: "/generate" });
await server.run();
