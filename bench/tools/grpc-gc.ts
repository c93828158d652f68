/**
 * What one gRPC request of a large tensor costs the server, in figures that a busy machine
 * bends less than latency: its CPU time per request (every thread of the process), and the
 * garbage collections of each of its threads (V8 isolates, from `--trace-gc`), with latency
 * quantiles beside them. Starts `shoal serve` from each given checkout in turn, with the sum
 * model of `npm run bench -- grpc --tensor-kb` (run that once first: it writes the model's
 * repository), and sends it `--requests` calls of one FP32 tensor of `--kb` KiB, one at a time,
 * after 100 to warm up; `--repeat` runs the checkouts in turn that many times.
 *
 *   node --import tsx bench/tools/grpc-gc.ts [--kb 1024] [--requests 400] [--repeat 3] DIR...
 *
 * DIR is a checkout with its dist/ built: this tree (`.`), or one made by bench/tools/checkout.sh.
 * One JSON line per run: the isolate whose address is lowest is the main thread.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { cacheDir } from "../lib/peers.js";
import { freePort } from "../lib/server.js";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { kb: { type: "string", default: "1024" }, requests: { type: "string", default: "400" }, repeat: { type: "string", default: "1" } } });
const kb = Number(values.kb);
const requests = Number(values.requests);
const root = resolve(import.meta.dirname, "..", "..");
const repo = join(cacheDir(root), "grpc-repo-sum");
const METHOD = "/inference.GRPCInferenceService/ModelInfer";

// Process CPU time (user and system, every thread) in ms, from /proc.
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function measure(dir: string): Promise<object> {
  const [grpcPort, port] = [await freePort(), await freePort()];
  const args = ["--trace-gc", "dist/cli/main.js", "serve", "--model-repository", repo, "--workers", "1", "--grpc-port", String(grpcPort), "--port", String(port), "--address", "127.0.0.1", "--log-level", "warn", "--max-request-size", String(64 << 20)];
  const server = spawn(process.execPath, args, { cwd: dir, stdio: ["ignore", "pipe", "inherit"] });
  let trace = "";
  server.stdout.on("data", (chunk: Buffer) => (trace += chunk.toString()));
  const definition = loadSync("grpc_service.proto", { includeDirs: [join(dir, "proto")], keepCase: true, longs: String, defaults: true, oneofs: true });
  const service = definition["inference.GRPCInferenceService"] as unknown as Record<string, { requestSerialize(m: object): Buffer }>;
  const width = Math.round((kb * 1024) / 4);
  const tensor = Float32Array.from({ length: width }, (_, i) => ((i * 7) % 10) / 10);
  const message = service.ModelInfer!.requestSerialize({ model_name: "sum", inputs: [{ name: "x", datatype: "FP32", shape: [width] }], raw_input_contents: [Buffer.from(tensor.buffer)] });
  const client = new grpc.Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
  const identity = (b: Buffer) => b;
  const call = () => new Promise<grpc.ServiceError | null>((done) => client.makeUnaryRequest(METHOD, identity, identity, message, (err) => done(err)));
  try {
    for (let attempt = 0; (await call()) !== null; attempt++) {
      if (attempt > 600) throw new Error(`${dir}: the server did not answer within 2 minutes`);
      await new Promise((r) => setTimeout(r, 200));
    }
    for (let i = 0; i < 100; i++) await call();
    const mark = trace.length;
    const cpu = cpuMs(server.pid!);
    const latencies: number[] = [];
    for (let i = 0; i < requests; i++) {
      const t = performance.now();
      const err = await call();
      if (err !== null) throw new Error(`${dir}: ${err.message}`);
      latencies.push(performance.now() - t);
    }
    const cpuUsPerRequest = Math.round(((cpuMs(server.pid!) - cpu) * 1000) / requests);
    latencies.sort((a, b) => a - b);
    const at = (q: number) => Number(latencies[Math.floor(q * requests)]!.toFixed(2));
    // Per isolate and kind: how many collections, and their pauses together in ms.
    const gc: Record<string, { count: number; ms: number }> = {};
    for (const line of trace.slice(mark).split("\n")) {
      const m = /\[\d+:(0x[0-9a-f]+)\]\s+\d+ ms: ([A-Za-z-]+)[^,]*, ([\d.]+) \/ [\d.]+ ms/.exec(line);
      if (m === null) continue;
      const entry = (gc[`${m[1]} ${m[2]}`] ??= { count: 0, ms: 0 });
      entry.count++;
      entry.ms = Math.round(entry.ms + Number(m[3]));
    }
    return { dir, kb, requests, cpuUsPerRequest, p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), gc };
  } finally {
    client.close();
    server.kill("SIGTERM");
  }
}

for (let round = 0; round < Number(values.repeat); round++) {
  for (const dir of positionals) console.log(JSON.stringify(await measure(resolve(dir))));
}
