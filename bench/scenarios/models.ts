/**
 * Models benchmark: what the shared pool costs in memory per model, and what the V2 protocol
 * costs in throughput.
 *
 * Memory: N generated MLPs (256→1024→1024→10, 5.3 MB of weights each) are loaded one by one
 * into `shoal serve --model-repository` with a pool of 2 workers (the repository starts empty;
 * each model is added to it and loaded with the repository API, then answers one request), and
 * the resident memory of the server's whole process tree is read after each. Beside it: the same
 * models with a worker of their own each (a Server with one `num: 1` stage per model), started
 * with 1 and with N models.
 *
 * Throughput, in alternating rounds: one MLP through the V2 infer path beside the same model
 * through `shoal serve model.onnx`'s /inference, and a 1 MB FP32 tensor (262,144 values) to a
 * model that sums it, as V2 JSON beside the binary tensor extension.
 */
import { linkSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "../../src/client/client.js";
import { encodeInferenceRequest } from "../../src/v2/index.js";
import { gitState, machineBusy, machineInfo, shownPath, type MachineInfo } from "../lib/machine.js";
import { alternate, describePoint, measureOnce, measurePoint, quietHelp, quietOptions, quietSettings, summarise, SUMMARY_ALIGN, SUMMARY_HEADERS, summaryCells, wholeNumber, type Measured, type QuietSettings, type Summary } from "../lib/measure.js";
import { cacheDir, ensureMlp } from "../lib/peers.js";
import { treeMemory, type TreeMemory } from "../lib/proctree.js";
import { markdownTable, textTable, writeResults, targetsAndCommands, reportHeader } from "../lib/results.js";
import type { Scenario, ScenarioContext } from "../lib/scenario.js";
import { freePort, startServer, type RunningServer, type ServerSpec } from "../lib/server.js";
import { requireWrk, wrkVersion, type WrkOptions } from "../lib/wrk.js";
import { row } from "./model.js";

/** Sized so that the default run takes about 3 minutes. */
export const defaults = { duration: 8, rounds: 3, warmup: 3 };

const SHAPE = { inputs: 256, hidden: 1024, layers: 2, outputs: 10 };
const WEIGHT_BYTES = 4 * (SHAPE.inputs * SHAPE.hidden + SHAPE.hidden + SHAPE.hidden * SHAPE.hidden + SHAPE.hidden + SHAPE.hidden * SHAPE.outputs + SHAPE.outputs);
/** What "a few MB" over the weights per extra model means for the target. */
const FEW_MB = 3 * 1024 * 1024;
const BATCH = { maxBatchSize: 32, maxWaitMs: 5 };
/** Values of the large tensor: 1 MB of FP32. */
const LARGE = 262_144;
const MiB = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const v2Body = (name: string, values: number[]) => JSON.stringify({ inputs: [{ name, datatype: "FP32", shape: [1, values.length], data: values }] });

async function postOk(url: string, body: string | Uint8Array, headers: Record<string, string> = { "content-type": "application/json" }): Promise<string> {
  const res = await fetch(url, { method: "POST", body, headers, signal: AbortSignal.timeout(60_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST ${url} answered ${res.status}: ${text.slice(0, 300)}`);
  return text;
}

/** The generated models, bench/.cache/models/<name>/<name>.onnx (written once). */
function prepareModels(root: string, count: number, log: (line: string) => void): { dir: string; names: string[] } {
  const dir = join(cacheDir(root), "models");
  const names = Array.from({ length: count }, (_, i) => `mlp${String(i).padStart(2, "0")}`);
  names.forEach((name, i) => {
    mkdirSync(join(dir, name), { recursive: true });
    ensureMlp(root, join("models", name, name), { ...SHAPE, seed: i + 1 }, log);
  });
  return { dir, names };
}

/** A model repository under bench/.cache/repos/ (emptied first) and a way to add models to it. */
function repository(root: string, name: string, models: string) {
  const dir = join(cacheDir(root), "repos", name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const settings = (model: string, s: Record<string, unknown>) => {
    mkdirSync(join(dir, model), { recursive: true });
    writeFileSync(join(dir, model, "model-settings.json"), JSON.stringify({ name: model, ...s }));
  };
  return {
    dir,
    /** Adds an MLP (its file hard-linked, not copied). */
    mlp(model: string) {
      settings(model, { runtime: "onnx", ...BATCH });
      linkSync(join(models, model, `${model}.onnx`), join(dir, model, "model.onnx"));
    },
    /** Adds the summing module-runtime model (re-exported from its folder: a runtime must be inside it). */
    sum() {
      settings("sum", {
        runtime: "./sum-model.ts",
        inputs: [{ name: "x", datatype: "FP32", shape: [-1] }],
        outputs: [{ name: "sum", datatype: "FP32", shape: [1] }],
      });
      writeFileSync(join(dir, "sum", "sum-model.ts"), `export { default } from ${JSON.stringify(pathToFileURL(resolve(root, "bench/servers/sum-model.ts")).href)};\n`);
    },
  };
}

const SERVE = "dist/cli/main.js";
const QUIET_FLAGS = ["--port", "{port}", "--address", "127.0.0.1", "--log-level", "warn", "--log-format", "json"];

async function serve(root: string, name: string, args: string[], probe: ServerSpec["probe"], script = SERVE): Promise<RunningServer> {
  // A model repository's gRPC service on a free port: 8001 may be taken.
  return startServer({ name, script, args: [...args, ...QUIET_FLAGS], env: { SHOAL_GRPC_PORT: String(await freePort()) }, port: await freePort(), cwd: root, probe, startTimeoutMs: 120_000 });
}

interface MemorySample extends TreeMemory {
  models: number;
}

/** Resident memory once the server has settled. */
async function settled(pid: number, models: number): Promise<MemorySample> {
  await sleep(500);
  return { models, ...treeMemory(pid) };
}

interface Target {
  name: string;
  server: "inference" | "v2";
  path: string;
  connections: number;
  script: string;
  env: Record<string, string>;
}

interface Point extends Measured {
  target: string;
  round: number;
}

interface ModelsData {
  scenario: "models";
  date: string;
  invocation: string;
  machine: MachineInfo;
  git: { commit: string; srcDirty: boolean };
  busyAtStart: number;
  settings: QuietSettings & { models: number; shape: typeof SHAPE; weightBytes: number; batch: typeof BATCH; rounds: number; durationSec: number; warmupSec: number; largeValues: number };
  commands: Record<string, string[]>;
  memory: {
    shared: MemorySample[];
    dedicated: MemorySample[];
    /** Bytes per model loaded after the first: (last - first) / (N - 1). */
    sharedPerModel: number;
    dedicatedPerModel: number;
    /** The first model's cost over the empty shared pool (ONNX Runtime's library included). */
    sharedFirstModel: number;
  };
  targets: Target[];
  summary: Record<string, Summary>;
  points: Point[];
  discarded: Point[];
}

async function run(ctx: ScenarioContext): Promise<void> {
  requireWrk();
  const { common, values, root, log } = ctx;
  const count = wholeNumber("--models", values.models as string | undefined, 20);
  if (count < 2) throw new Error("--models must be at least 2");
  const connections = wholeNumber("--connections", values.connections as string | undefined, 64);
  const largeConnections = wholeNumber("--large-connections", values["large-connections"] as string | undefined, 8);
  const quiet = quietSettings(values);
  const machine = machineInfo(wrkVersion());
  const git = gitState(root);
  log(`models: ${count} MLPs on a shared pool of 2 vs a worker each; V2 vs /inference; V2 JSON vs binary for ${LARGE} FP32 values`);
  const busyAtStart = Math.round((await machineBusy(1000)) * 100) / 100;
  log(`other processes are using ${busyAtStart} cores`);
  const { dir: modelsDir, names } = prepareModels(root, count, log);
  const commands: Record<string, string[]> = {};
  const mlpBody = v2Body("input", row(SHAPE.inputs));
  const mlpInput = { inputs: [{ name: "input", data: Float32Array.from(row(SHAPE.inputs)), shape: [1, SHAPE.inputs] }] };

  // Memory of the shared pool, one model at a time.
  const shared: MemorySample[] = [];
  {
    const repo = repository(root, "shared", modelsDir);
    const server = await serve(root, "shared-pool", ["serve", "--model-repository", repo.dir, "--grpc-port", "0", "--workers", "2", "--model-control", "explicit"], { path: "/v2/repository/index", body: "{}" });
    commands["shared pool"] = [server.command, `curl -X POST ${server.url}/v2/repository/models/<name>/load   # after adding <name> to the repository, for each model`];
    const client = new Client(server.url, { timeoutMs: 60_000 });
    try {
      shared.push(await settled(server.pid, 0));
      for (const [i, name] of names.entries()) {
        repo.mlp(name);
        await client.v2.load(name);
        await client.v2.infer(name, mlpInput);
        shared.push(await settled(server.pid, i + 1));
        log(`  shared pool, ${i + 1} models: RSS ${MiB(shared.at(-1)!.rssBytes)} MiB (PSS ${MiB(shared.at(-1)!.pssBytes)} MiB, ${shared.at(-1)!.processes} process(es))`);
      }
    } finally {
      await server.stop();
    }
  }

  // Memory with a worker per model: a fresh server with 1, then N stages.
  const dedicated: MemorySample[] = [];
  for (const k of [1, count]) {
    const input = JSON.stringify({ input: [row(SHAPE.inputs)] });
    const server = await serve(root, `dedicated-${k}`, ["--models-dir", modelsDir, "--count", String(k)], { path: `/${names[0]}`, body: input }, "bench/servers/shoal-stages.ts");
    commands[`worker per model, ${k}`] = [server.command];
    try {
      for (const name of names.slice(0, k)) await postOk(`${server.url}/${name}`, input);
      dedicated.push(await settled(server.pid, k));
      log(`  a worker per model, ${k} models: RSS ${MiB(dedicated.at(-1)!.rssBytes)} MiB (PSS ${MiB(dedicated.at(-1)!.pssBytes)} MiB)`);
    } finally {
      await server.stop();
    }
  }
  const perModel = (s: MemorySample[]) => (s.at(-1)!.rssBytes - s.find((x) => x.models === 1)!.rssBytes) / (count - 1);

  // Throughput: /inference vs V2 on one MLP, and V2 JSON vs binary on a large tensor.
  const repo = repository(root, "throughput", modelsDir);
  repo.mlp(names[0]!);
  repo.sum();
  // Eighths from -1 to 1: exact in FP32 and 4 to 6 characters each in JSON.
  const large = Float32Array.from({ length: LARGE }, (_, i) => ((i % 17) - 8) / 8);
  const expected = large.reduce((a, b) => a + b, 0);
  const request = { inputs: [{ name: "x", datatype: "FP32" as const, shape: [LARGE], data: large }] };
  const files = { json: join(repo.dir, "large.json"), binary: join(repo.dir, "large.bin") };
  const json = encodeInferenceRequest(request);
  const binary = encodeInferenceRequest(request, { binaryInputs: true });
  writeFileSync(files.json, json.body);
  writeFileSync(files.binary, binary.body);
  const v2Script = join("bench", "lua", "v2-infer.lua");
  const targets: Target[] = [
    { name: "/inference (shoal serve model.onnx)", server: "inference", path: "/inference", connections, script: join("bench", "lua", "post-json.lua"), env: { WRK_BODY: JSON.stringify({ input: [row(SHAPE.inputs)] }) } },
    { name: `V2 infer (model repository)`, server: "v2", path: `/v2/models/${names[0]}/infer`, connections, script: join("bench", "lua", "post-json.lua"), env: { WRK_BODY: mlpBody } },
    { name: `V2 JSON, ${LARGE} FP32 (${MiB(json.body.byteLength)} MiB body)`, server: "v2", path: "/v2/models/sum/infer", connections: largeConnections, script: v2Script, env: { WRK_BODY_FILE: files.json, WRK_CONTENT_TYPE: json.contentType } },
    { name: `V2 binary, ${LARGE} FP32 (${MiB(binary.body.byteLength)} MiB body)`, server: "v2", path: "/v2/models/sum/infer", connections: largeConnections, script: v2Script, env: { WRK_BODY_FILE: files.binary, WRK_CONTENT_TYPE: binary.contentType, WRK_HEADER_LENGTH: String(binary.headerLength) } },
  ];
  const points: Point[] = [];
  const discarded: Point[] = [];
  const servers = {} as Record<Target["server"], RunningServer>;
  try {
    servers.inference = await serve(root, "inference", ["serve", join(modelsDir, names[0]!, `${names[0]}.onnx`), "--num", "1", "--max-batch-size", String(BATCH.maxBatchSize), "--max-wait-ms", String(BATCH.maxWaitMs)], {
      path: "/inference",
      body: targets[0]!.env.WRK_BODY!,
    });
    servers.v2 = await serve(root, "v2", ["serve", "--model-repository", repo.dir, "--grpc-port", "0", "--workers", "1"], { path: targets[1]!.path, body: mlpBody });
    commands["/inference"] = [servers.inference.command];
    commands["V2"] = [servers.v2.command];
    // Both large bodies must be understood before they are measured.
    for (const [body, headers] of [
      [json.body, { "content-type": json.contentType }],
      [binary.body, { "content-type": binary.contentType, "inference-header-content-length": String(binary.headerLength) }],
    ] as const) {
      const answer = JSON.parse(await postOk(`${servers.v2.url}/v2/models/sum/infer`, body, headers)) as { outputs: { data: number[] }[] };
      const got = answer.outputs[0]!.data[0]!;
      if (Math.abs(got - expected) > 1e-3 * Math.max(1, Math.abs(expected))) throw new Error(`the sum model answered ${got}, expected ${expected}`);
    }
    const wrkOptions = (t: Target, seconds: number): WrkOptions => ({ url: `${servers[t.server].url}${t.path}`, connections: t.connections, durationSec: seconds, script: t.script, cwd: root, env: t.env });
    for (const t of targets) {
      log(`  warm-up ${t.name} (${common.warmupSec} s)`);
      const warm = await measureOnce(servers[t.server].pid, wrkOptions(t, common.warmupSec));
      if (warm.non2xx > 0) throw new Error(`${warm.non2xx} non-2xx answers during the warm-up of ${t.name}`);
    }
    for (let round = 1; round <= common.rounds; round++) {
      for (const t of alternate(targets, round)) {
        const label = `round ${round} ${t.name} c=${t.connections}`;
        const m = await measurePoint(servers[t.server].pid, wrkOptions(t, common.durationSec), quiet, log, label);
        points.push({ target: t.name, round, ...m.point });
        discarded.push(...m.discarded.map((d) => ({ target: t.name, round, ...d })));
        commands[`wrk ${t.name}`] ??= [`${Object.entries(t.env).map(([k, v]) => `${k}='${v.length > 80 ? `${v.slice(0, 60)}...` : shownPath(v, root)}'`).join(" ")} ${m.point.wrkCommand}`];
        log(describePoint(label, m.point));
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.stop();
  }

  const data: ModelsData = {
    scenario: "models",
    date: new Date().toISOString(),
    invocation: `npm run bench -- ${process.argv.slice(2).join(" ")}`,
    machine,
    git,
    busyAtStart,
    settings: { ...quiet, models: count, shape: SHAPE, weightBytes: WEIGHT_BYTES, batch: BATCH, rounds: common.rounds, durationSec: common.durationSec, warmupSec: common.warmupSec, largeValues: LARGE },
    commands,
    memory: { shared, dedicated, sharedPerModel: perModel(shared), dedicatedPerModel: perModel(dedicated), sharedFirstModel: shared[1]!.rssBytes - shared[0]!.rssBytes },
    targets,
    summary: Object.fromEntries(targets.map((t) => [t.name, summarise(points.filter((p) => p.target === t.name))])),
    points,
    discarded,
  };
  const written = writeResults(ctx.resultsDir, "models", data, markdown(data));
  process.stdout.write("\n" + headline(data) + "\n\n");
  process.stdout.write(`results: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}\n`);
}

function memoryRows(data: ModelsData): string[][] {
  const { shared, dedicated } = data.memory;
  const wanted = new Set([0, 1, 2, 5, 10, data.settings.models]);
  return shared
    .filter((s) => wanted.has(s.models))
    .map((s) => {
      const d = dedicated.find((x) => x.models === s.models);
      return [String(s.models), MiB(s.rssBytes), MiB(s.pssBytes), d === undefined ? "" : MiB(d.rssBytes), d === undefined ? "" : MiB(d.pssBytes)];
    });
}
const MEMORY_HEADERS = ["models loaded", "shared pool RSS MiB", "shared pool PSS MiB", "worker per model RSS MiB", "worker per model PSS MiB"];
const MEMORY_ALIGN = ["r", "r", "r", "r", "r"] as const;

const HEADERS = ["path", "conns", ...SUMMARY_HEADERS];
const ALIGN = ["l", "r", ...SUMMARY_ALIGN] as const;
function rows(data: ModelsData): string[][] {
  return data.targets.map((t) => [t.name, String(t.connections), ...summaryCells(data.summary[t.name]!)]);
}

function verdicts(data: ModelsData): string[] {
  const m = data.memory;
  const limit = data.settings.weightBytes + FEW_MB;
  const rps = (i: number) => data.summary[data.targets[i]!.name]!.requestsPerSec.median;
  return [
    `shared pool: +${MiB(m.sharedPerModel)} MiB per model after the first (weights ${MiB(data.settings.weightBytes)} MiB; target <= weights + ${MiB(FEW_MB)} MiB = ${MiB(limit)} MiB: ${m.sharedPerModel <= limit ? "met" : "NOT met"}); the first model costs ${MiB(m.sharedFirstModel)} MiB over the empty pool`,
    `a worker per model: +${MiB(m.dedicatedPerModel)} MiB per model; ${data.settings.models} models take ${MiB(m.dedicated.at(-1)!.rssBytes)} MiB against ${MiB(m.shared.at(-1)!.rssBytes)} MiB on the shared pool`,
    `V2 infer / /inference on one MLP: ${(rps(1) / rps(0)).toFixed(2)}`,
    `binary / JSON for ${data.settings.largeValues} FP32 values: ${(rps(3) / rps(2)).toFixed(2)}`,
  ];
}

function headline(data: ModelsData): string {
  return [textTable(MEMORY_HEADERS, memoryRows(data), MEMORY_ALIGN), "", textTable(HEADERS, rows(data), ALIGN), "", ...verdicts(data)].join("\n");
}

function markdown(data: ModelsData): string {
  const { settings: s } = data;
  return [
    ...reportHeader("Models benchmark: memory of the shared pool, V2 throughput", data),
    `- Models: ${s.models} MLPs ${s.shape.inputs}→${s.shape.hidden}→${s.shape.hidden}→${s.shape.outputs} (random weights, ${MiB(s.weightBytes)} MiB each), maxBatchSize ${s.batch.maxBatchSize}, maxWaitMs ${s.batch.maxWaitMs}`,
    "- Memory: VmRSS (and PSS) summed over the server's process tree, 0.5 s after each model answered its first request",
    `- Throughput: wrk, 1 thread, ${s.rounds} rounds of ${s.durationSec} s after a ${s.warmupSec} s warm-up each, paths alternating; medians over rounds; unpinned`,
    "",
    "## Memory",
    "",
    markdownTable(MEMORY_HEADERS, memoryRows(data), MEMORY_ALIGN),
    "",
    "## Throughput",
    "",
    markdownTable(HEADERS, rows(data), ALIGN),
    "",
    ...targetsAndCommands(verdicts(data), data.commands),
  ].join("\n");
}

export const scenario: Scenario = {
  name: "models",
  summary: "Memory per model on the shared pool vs a worker per model; V2 infer vs /inference; V2 JSON vs binary tensors for 1 MB.",
  options: {
    models: { type: "string" },
    connections: { type: "string" },
    "large-connections": { type: "string" },
    ...quietOptions,
  },
  help: {
    "models <n>": "MLPs loaded for the memory figures (default 20)",
    "connections <n>": "wrk connections for the one-MLP paths (default 64)",
    "large-connections <n>": "wrk connections for the 1 MB tensor (default 8: a request takes milliseconds, more only queue)",
    ...quietHelp,
  },
  run,
};
