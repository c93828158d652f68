/**
 * What `shoal bench` calls, and how one request to it is sent: a plain route, a V2 model over REST
 * (JSON or binary tensors) or gRPC, or an OpenAI route streamed. The first request goes through
 * the client (`shoal/client`, `shoal/client/grpc`), so a target that refuses it stops the run with
 * the server's own message; the load's requests are then encoded once and sent as bytes, so that
 * the load generator spends as little of the machine as it can.
 */
import type { ServiceDefinition } from "@grpc/grpc-js";
import { Client } from "../client/client.js";
import { HttpError } from "../client/errors.js";
import { GrpcClient } from "../client/grpc/grpc-client.js";
import { inferRequestMessage } from "../client/grpc/infer-messages.js";
import { toRequest, type InferInput } from "../client/tensors.js";
import { loadProtos } from "../grpc/protos.js";
import { HEADER_LENGTH } from "../v2/binary.js";
import { encodeInferenceRequest } from "../v2/request.js";
import { httpSender } from "./http-sender.js";
import { grpcSender, type Send } from "./loadgen.js";

/** How requests are sent. */
export type Protocol = "plain" | "rest" | "binary" | "grpc" | "openai" | "chat";

/** What is benchmarked. */
export interface TargetSpec {
  protocol: Protocol;
  /** The server's base URL (`http://127.0.0.1:8000`). */
  url: string;
  /** A plain route's path. */
  path?: string;
  /** A plain route's body (none: GET) and its content type. */
  body?: Uint8Array;
  contentType?: string;
  /** The V2 model, or the OpenAI model. */
  model?: string;
  version?: string;
  /** A V2 request. */
  input?: InferInput;
  /** The gRPC address (`127.0.0.1:8001`). */
  grpcAddress?: string;
  /** An OpenAI request's prompt and length. */
  prompt?: string;
  maxTokens?: number;
  /** Asks the server to generate `maxTokens` whatever the model says (vLLM's and Shoal's `ignore_eos`). */
  ignoreEos?: boolean;
  /** Most connections open at once (HTTP/1.1 routes). */
  connections: number;
}

/** A target ready to load. */
export interface Target {
  send: Send;
  close(): void;
}

/** Sends the first request through the client (throwing what the server said if it fails), then makes the load's sender. */
export async function prepareTarget(t: TargetSpec): Promise<Target> {
  const client = new Client(t.url, { timeoutMs: 30_000 });
  const model = t.model ?? "";
  const modelPath = `/v2/models/${encodeURIComponent(model)}${t.version === undefined ? "" : `/versions/${encodeURIComponent(t.version)}`}/infer`;
  switch (t.protocol) {
    case "plain": {
      const path = t.path ?? "/";
      const headers: Record<string, string> = t.body === undefined ? {} : { "content-type": t.contentType ?? "application/json" };
      if (t.body === undefined) await client.get(path);
      else await client.post(path, t.body, { format: "bytes", headers });
      return httpSender(`${t.url}${path}`, t.body, headers, t.connections);
    }
    case "rest":
    case "binary": {
      const input = need(t.input, "a V2 request");
      const binary = t.protocol === "binary";
      await client.v2.infer(model, input, { binary, ...(t.version === undefined ? {} : { version: t.version }) });
      const request = toRequest(input);
      if (binary) request.parameters = { ...request.parameters, binary_data_output: true };
      const { body, contentType, headerLength } = encodeInferenceRequest(request, { binaryInputs: binary });
      const headers: Record<string, string> = { "content-type": contentType };
      if (headerLength !== undefined) headers[HEADER_LENGTH] = String(headerLength);
      return httpSender(`${t.url}${modelPath}`, body, headers, t.connections);
    }
    case "grpc": {
      const address = need(t.grpcAddress, "the gRPC address");
      const input = need(t.input, "a V2 request");
      const grpc = new GrpcClient(address);
      try {
        await grpc.infer(model, input, { timeoutMs: 30_000, ...(t.version === undefined ? {} : { version: t.version }) });
      } finally {
        grpc.close();
      }
      const service = loadProtos()["inference.GRPCInferenceService"] as ServiceDefinition;
      const message = service.ModelInfer!.requestSerialize(inferRequestMessage(model, t.version ?? "", toRequest(input)));
      return grpcSender(address, "/inference.GRPCInferenceService/ModelInfer", message);
    }
    case "openai":
    case "chat": {
      const name = t.model ?? (await client.openai.models())[0];
      if (name === undefined) throw new Error(`${t.url}/v1/models lists no model: give one with --model`);
      const send = openAISender(client, t.protocol, { model: name, prompt: t.prompt ?? "Fish swim in shoals.", maxTokens: t.maxTokens ?? 64, ignoreEos: t.ignoreEos === true });
      const first = await send();
      if (typeof first !== "object") throw new Error(`the first streamed request failed: ${String(first)}`);
      return { send, close: () => undefined };
    }
  }
}

/**
 * A streamed completion per call, timed as `vllm bench serve` times one: the first chunk with text
 * after the request was sent, the gaps between those after it, and the tokens (the server's
 * `usage` when it sends one, else the chunks with text).
 */
function openAISender(client: Client, route: "openai" | "chat", o: { model: string; prompt: string; maxTokens: number; ignoreEos: boolean }): Send {
  const fields = { model: o.model, max_tokens: o.maxTokens, stream_options: { include_usage: true }, ...(o.ignoreEos ? { ignore_eos: true } : {}) };
  return async () => {
    const started = performance.now();
    let last = started;
    let first = 0;
    const gapsMs: number[] = [];
    let chunks = 0;
    let usage: number | undefined;
    const see = (text: string | undefined) => {
      if (text === undefined || text === "") return;
      const now = performance.now();
      if (chunks === 0) first = now - started;
      else gapsMs.push(now - last);
      last = now;
      chunks++;
    };
    try {
      if (route === "chat") {
        for await (const chunk of client.openai.chatStream({ ...fields, messages: [{ role: "user", content: o.prompt }] })) {
          see(chunk.choices[0]?.delta.content);
          usage = chunk.usage?.completion_tokens ?? usage;
        }
      } else {
        for await (const chunk of client.openai.completionStream({ ...fields, prompt: o.prompt })) {
          see(chunk.choices[0]?.text);
          usage = chunk.usage?.completion_tokens ?? usage;
        }
      }
    } catch (err) {
      if (err instanceof HttpError) return `HTTP ${err.status}`;
      throw err;
    }
    // An answer of no text (a model that ended at once) has no first token to time.
    return { ttftMs: chunks === 0 ? NaN : first, gapsMs, tokens: usage ?? chunks };
  };
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the target needs ${what}`);
  return value;
}
