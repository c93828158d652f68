/**
 * grpc: one ONNX model (a generated MLP) served from a model repository by `shoal serve`, measured
 * over REST with JSON tensors, REST with binary tensor data, and gRPC with raw contents, at 1 to 64
 * concurrent streams, by the benchmark's own load generator (src/bench/loadgen.ts: wrk speaks no
 * gRPC); with `--servers ...,mlserver-grpc`, MLServer's gRPC for the same model (bench/.venv, set
 * up from PyPI like the other scenarios' peers). Same batching everywhere: 2 workers, batches of up
 * to 32, 5 ms wait.
 */
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { loadSync } from "@grpc/proto-loader";
import { againstCheckout, BEFORE } from "../lib/against.js";
import { httpSender } from "../../src/bench/http-sender.js";
import { grpcSender, runLoad, type LoadResult, type Send } from "../../src/bench/loadgen.js";
import { nodeVersions, cacheDir, ensureMlp, ensurePeers, mlserverSpec, peerVersions } from "../lib/peers.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer, type ServerSpec } from "../lib/server.js";
import { median } from "../lib/stats.js";

export const defaults = { duration: 5, rounds: 1, warmup: 2 };

const MODELS = {
  small: { inputs: 256, hidden: 512, layers: 1, outputs: 10 },
  tiny: { inputs: 16, hidden: 32, layers: 1, outputs: 4 },
} as const;
const WORKERS = 2;
const MAX_BATCH = 32;
const MAX_WAIT_MS = 5;
const ALL = ["shoal-json", "shoal-binary", "shoal-grpc", "mlserver-grpc"] as const;
type Contender = (typeof ALL)[number];
const INFER = "/inference.GRPCInferenceService/ModelInfer";
// The gRPC client takes messages of any size; the server's limit is --max-request-size.

interface Cell extends LoadResult {
  /** A contender, `<name>@before` when run from the --against checkout. */
  server: string;
  streams: number;
  round: number;
}

/** One contender's way of making a load of n streams. */
type Load = (streams: number) => { send: Send; close(): void };

async function run(ctx: ScenarioContext): Promise<void> {
  const { root, log, common, values } = ctx;
  const size = ((values.model as string | undefined) ?? "small") as keyof typeof MODELS;
  const shape = MODELS[size];
  if (shape === undefined) throw new Error(`--model must be small or tiny, not '${size}'`);
  const streams = ((values.streams as string | undefined) ?? "1,2,4,8,16,32,64").split(",").map(Number);
  const servers = ((values.servers as string | undefined) ?? "shoal-json,shoal-binary,shoal-grpc,mlserver-grpc").split(",") as Contender[];
  for (const s of servers) if (!ALL.includes(s)) throw new Error(`unknown server '${s}'; known: ${ALL.join(", ")}`);

  const model = ensureMlp(root, `mlp-grpc-${size}`, shape, log);
  // With --tensor-kb, a tensor of that size to the sum model (one pass over it, no batching):
  // what moving it costs, against a tensor of one element.
  const tensorKb = values["tensor-kb"] === undefined ? undefined : Number(values["tensor-kb"]);
  if (tensorKb !== undefined && !(tensorKb > 0)) throw new Error(`--tensor-kb must be a positive number, not '${values["tensor-kb"]}'`);
  // A repository of one model, its files copied in: a model's files stay inside its folder.
  const repo = join(cacheDir(root), tensorKb === undefined ? `grpc-repo-${size}` : "grpc-repo-sum");
  const name = tensorKb === undefined ? "mlp" : "sum";
  mkdirSync(join(repo, name), { recursive: true });
  if (tensorKb === undefined) {
    copyFileSync(model, join(repo, "mlp", "model.onnx"));
    writeFileSync(join(repo, "mlp", "model-settings.json"), JSON.stringify({ name: "mlp", runtime: "onnx", maxBatchSize: MAX_BATCH, maxWaitMs: MAX_WAIT_MS }));
  } else {
    writeFileSync(join(repo, "sum", "sum-model.ts"), `export { default } from ${JSON.stringify(pathToFileURL(join(root, "bench", "servers", "sum-model.ts")).href)};\n`);
    writeFileSync(join(repo, "sum", "model-settings.json"), JSON.stringify({ name: "sum", runtime: "./sum-model.ts" }));
  }

  // One request of each kind: a row of the model's input, or the tensor of --tensor-kb.
  const width = tensorKb === undefined ? shape.inputs : Math.round((tensorKb * 1024) / 4);
  const row = Float32Array.from({ length: width }, (_, i) => ((i * 7) % 10) / 10);
  const tensor = tensorKb === undefined ? { name: "input", datatype: "FP32", shape: [1, shape.inputs] } : { name: "x", datatype: "FP32", shape: [width] };
  const json = Buffer.from(JSON.stringify({ inputs: [{ ...tensor, data: [...row] }] }));
  const header = Buffer.from(JSON.stringify({ inputs: [{ ...tensor, parameters: { binary_data_size: row.byteLength } }], parameters: { binary_data_output: true } }));
  const binary = Buffer.concat([header, Buffer.from(row.buffer)]);
  const definition = loadSync("grpc_service.proto", { includeDirs: [join(root, "proto")], keepCase: true, longs: String, defaults: true, oneofs: true });
  const service = definition["inference.GRPCInferenceService"] as unknown as Record<string, { requestSerialize(m: object): Buffer }>;
  const grpcMessage = service.ModelInfer!.requestSerialize({ model_name: name, inputs: [tensor], raw_input_contents: [Buffer.from(row.buffer)] });

  const cells: Cell[] = [];
  // Contenders measured together (a Shoal server and its twin from --against): at each load of
  // each round back to back, the first of them swapped every round.
  const measure = async (group: [string, Load][]) => {
    for (const [, make] of group) {
      const warm = make(8);
      await runLoad(warm.send, 8, common.warmupSec);
      warm.close();
    }
    for (const n of streams) {
      for (let round = 0; round < common.rounds; round++) {
        const order = round % 2 === 0 ? group : [...group].reverse();
        for (const [server, make] of order) {
          const load = make(n);
          const result = await runLoad(load.send, n, common.durationSec);
          load.close();
          cells.push({ server, streams: n, round, ...result });
          log(`${server} ${n} streams: ${result.requestsPerSec.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ${result.errors} errors`);
        }
      }
    }
  };

  const shoalWanted = servers.filter((s) => s.startsWith("shoal-"));
  const before = againstCheckout(root, (values.against as string | undefined) ?? process.env.BENCH_AGAINST);
  if (shoalWanted.length > 0) {
    // This tree's Shoal, and with --against the same server from that checkout.
    const trees = [{ suffix: "", cwd: root }, ...(before === undefined ? [] : [{ suffix: BEFORE, cwd: before.dir }])];
    const running: { suffix: string; shoal: RunningServer; grpcPort: number }[] = [];
    try {
      for (const { suffix, cwd } of trees) {
        const grpcPort = await freePort();
        const spec: ServerSpec = {
          name: `shoal${suffix}`,
          script: "dist/cli/main.js",
          args: ["serve", "--model-repository", repo, "--workers", String(WORKERS), "--grpc-port", String(grpcPort), "--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json", "--max-request-size", String(64 * 1024 * 1024)],
          port: await freePort(),
          cwd,
          probe: { path: `/v2/models/${name}/infer`, body: json.toString() },
          startTimeoutMs: 120_000,
        };
        running.push({ suffix, shoal: await startServer(spec), grpcPort });
      }
      for (const server of shoalWanted) {
        await measure(
          running.map(({ suffix, shoal, grpcPort }): [string, Load] => {
            const url = `${shoal.url}/v2/models/${name}/infer`;
            if (server === "shoal-json") return [server + suffix, (n) => httpSender(url, json, { "content-type": "application/json" }, n)];
            if (server === "shoal-binary") return [server + suffix, (n) => httpSender(url, binary, { "content-type": "application/octet-stream", "inference-header-content-length": String(header.byteLength) }, n)];
            return [server + suffix, () => grpcSender(`127.0.0.1:${grpcPort}`, INFER, grpcMessage)];
          }),
        );
      }
    } finally {
      for (const { shoal } of running) await shoal.stop();
    }
  }
  let skipped: string | undefined;
  if (servers.includes("mlserver-grpc") && tensorKb !== undefined) {
    skipped = "MLServer's peer serves the MLP only: not measured with --tensor-kb";
    log(skipped);
  } else if (servers.includes("mlserver-grpc")) {
    let mlserver: RunningServer | undefined;
    try {
      ensurePeers(root, log);
      const grpcPort = await freePort();
      const spec = mlserverSpec(root, join("bench", "peers", "mlserver_model"), { BENCH_MODEL: model, BENCH_INTRA_OP_THREADS: "1", MLSERVER_GRPC_PORT: String(grpcPort), MLSERVER_PARALLEL_WORKERS: String(WORKERS) }, { path: "/v2/models/mlp/infer", body: json.toString() });
      const port = await freePort();
      // The spec's environment names the HTTP port ({port}) and asks for free ones ({free}).
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(spec.env ?? {})) env[k] = v.replaceAll("{port}", String(port)).replace("{free}", String(await freePort()));
      mlserver = await startServer({ ...spec, env, name: "mlserver", port, cwd: root });
      await measure([["mlserver-grpc", () => grpcSender(`127.0.0.1:${grpcPort}`, INFER, grpcMessage)]]);
    } catch (err) {
      skipped = `MLServer could not be measured: ${(err as Error).message.split("\n")[0]}`;
      log(skipped);
    } finally {
      await mlserver?.stop();
    }
  }
  report(ctx, tensorKb === undefined ? size : `sum of a ${tensorKb} KiB FP32 tensor`, cells, skipped, root, before?.commit);
}

function report(ctx: ScenarioContext, size: string, cells: Cell[], skipped: string | undefined, root: string, beforeCommit: string | undefined): void {
  mkdirSync(ctx.resultsDir, { recursive: true });
  const versions = { ...nodeVersions(root), ...peerVersions(root) };
  writeFileSync(join(ctx.resultsDir, "grpc.json"), `${JSON.stringify({ scenario: "grpc", model: size, common: ctx.common, versions, ...(beforeCommit === undefined ? {} : { before: beforeCommit }), skipped, cells }, null, 2)}\n`);
  const lines = [
    `# grpc: the same model over REST JSON, REST binary and gRPC (model ${size}, ${WORKERS} workers, max batch ${MAX_BATCH}, wait ${MAX_WAIT_MS} ms)`,
    "",
    "| server | streams | round | req/s | p50 ms | p99 ms | errors |",
    "|---|--:|--:|--:|--:|--:|--:|",
    ...cells.map((c) => `| ${c.server} | ${c.streams} | ${c.round + 1} | ${c.requestsPerSec.toFixed(0)} | ${c.p50Ms.toFixed(2)} | ${c.p99Ms.toFixed(2)} | ${c.errors} |`),
    ...medians(cells, beforeCommit),
    ...(skipped === undefined ? [] : ["", skipped]),
    "",
  ];
  writeFileSync(join(ctx.resultsDir, "grpc.md"), lines.join("\n"));
}

// Medians over the rounds, per server and load; with --against, this tree's and the checkout's side by side.
function medians(cells: Cell[], beforeCommit: string | undefined): string[] {
  const groups = new Map<string, Cell[]>();
  for (const c of cells) groups.set(`${c.server} ${c.streams}`, [...(groups.get(`${c.server} ${c.streams}`) ?? []), c]);
  const rows = [...groups.values()].map((g) => {
    const m = (f: (c: Cell) => number) => median(g.map(f));
    return `| ${g[0]!.server} | ${g[0]!.streams} | ${g.length} | ${m((c) => c.requestsPerSec).toFixed(0)} | ${m((c) => c.p50Ms).toFixed(2)} | ${m((c) => c.p99Ms).toFixed(2)} |`;
  });
  const title = beforeCommit === undefined ? "Medians over the rounds" : `Medians over the rounds (\`@before\`: commit ${beforeCommit.slice(0, 12)})`;
  return ["", `## ${title}`, "", "| server | streams | rounds | req/s | p50 ms | p99 ms |", "|---|--:|--:|--:|--:|--:|", ...rows];
}

export const scenario: Scenario = {
  name: "grpc",
  summary: "the same ONNX model over REST JSON, REST binary and gRPC (and MLServer's gRPC), 1..64 concurrent streams",
  options: { model: { type: "string" }, streams: { type: "string" }, servers: { type: "string" }, "tensor-kb": { type: "string" }, against: { type: "string" } },
  help: {
    "model <size>": "small (256→512→10 MLP, default) or tiny",
    "streams <list>": "concurrent streams to measure at (default 1,2,4,8,16,32,64)",
    "servers <list>": `of ${ALL.join(", ")} (default all)`,
    "tensor-kb <n>": "send an FP32 tensor of n KiB to a model that sums it (no batching) instead of a row to the MLP",
    "against <dir>": "also run the Shoal servers from another checkout (made by bench/tools/checkout.sh), as <name>@before, measured back to back with this tree's at each load of each round (BENCH_AGAINST)",
  },
  run,
};
