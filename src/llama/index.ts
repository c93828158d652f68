/**
 * `shoal/llama`: a ready Worker that serves a GGUF language model with llama.cpp (the
 * `node-llama-cpp` package, an optional peer dependency), continuously batched, by Shoal's
 * text-generation contract (so `Server.openAI()` serves it).
 * @packageDocumentation
 */
export { LlamaWorker, llamaWorker, type LlamaOptions, type LlamaWorkerOptions, type LlamaSequence } from "./llama-worker.js";
