/**
 * A small closed-loop load generator of the benchmark's own, for what wrk cannot send (gRPC), and
 * for HTTP beside it so that both protocols are measured by the same client: `streams` loops, each
 * sending its next request when the last is answered, for a fixed time. It runs in the harness's
 * process, so its own CPU time is not the server's; on a small machine it competes with the server
 * for the cores, for every protocol alike.
 */
import { Agent, request } from "node:http";
import * as grpc from "@grpc/grpc-js";

/** One request, sent and answered; rejects (or resolves false) on a failed answer. */
export type Send = () => Promise<boolean>;

/** What a run measured. */
export interface LoadResult {
  requests: number;
  errors: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** Runs `streams` loops of `send` for `seconds` and summarises them. */
export async function runLoad(send: Send, streams: number, seconds: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  const loop = async () => {
    while (performance.now() < end) {
      const t = performance.now();
      let ok = false;
      try {
        ok = await send();
      } catch {
        ok = false;
      }
      if (ok) latencies.push(performance.now() - t);
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: streams }, loop));
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { requests: latencies.length, errors, requestsPerSec: latencies.length / elapsed, p50Ms: at(0.5), p99Ms: at(0.99) };
}

/** POSTs `body` to `url` over kept-alive connections (as many as there are streams). */
export function httpSender(url: string, body: Buffer, headers: Record<string, string>, streams: number): { send: Send; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: streams });
  const target = new URL(url);
  const send: Send = () =>
    new Promise((resolve, reject) => {
      const req = request({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: { ...headers, "content-length": body.byteLength } }, (res) => {
        res.on("data", () => {});
        res.on("end", () => resolve(res.statusCode === 200));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  return { send, close: () => agent.destroy() };
}

/**
 * Makes unary calls of `method` (`/package.Service/Method`) with a message serialized once
 * beforehand, on one channel (HTTP/2 multiplexes the streams), as gRPC clients usually do.
 */
export function grpcSender(target: string, method: string, message: Buffer): { send: Send; close(): void } {
  const client = new grpc.Client(target, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
  const identity = (b: Buffer) => b;
  const send: Send = () => new Promise((resolve) => client.makeUnaryRequest(method, identity, identity, message, (err) => resolve(err === null)));
  return { send, close: () => client.close() };
}
