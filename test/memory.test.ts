/**
 * Memory of the shared pool: several ONNX models on two worker threads answer as onnxruntime-node
 * does on its own, within a generous bound of memory; the processes Shoal starts keep glibc's
 * malloc set up for holding models (src/workers/allocator.ts), unless the environment sets it up.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import * as ort from "onnxruntime-node";
import { MALLOC_TUNABLES } from "../src/workers/allocator.js";
import { RUNTIME, childPids, waitFor, type ServerProcess } from "./helpers.js";
import { infer, ModelRepo, serveRepository } from "./model-helpers.js";

const LINUX = process.platform === "linux";
const MODELS = 6;
const SHAPE = { inputs: 64, hidden: 256, layers: 2, outputs: 10 };
const row = Float32Array.from({ length: SHAPE.inputs }, (_, i) => ((i % 9) - 4) / 4);

const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
const residentMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

describe("a model repository of several ONNX models on a shared pool of two threads", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  const names = Array.from({ length: MODELS }, (_, i) => `mlp${i}`);

  before(async () => {
    names.forEach((name, i) => {
      repo.mlp(name, "", { ...SHAPE, seed: i + 1 });
      repo.settings(name, { name, runtime: "onnx", maxBatchSize: 8, maxWaitMs: 2 });
    });
    server = await serveRepository(repo.dir, ["--workers", "2"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("every model answers what onnxruntime-node computes for it, concurrent requests included", async () => {
    const outputs = new Set<string>();
    for (const name of names) {
      const session = await ort.InferenceSession.create(`${repo.dir}/${name}/model.onnx`);
      const expected = (await session.run({ input: new ort.Tensor("float32", row, [1, SHAPE.inputs]) })).output!.data as Float32Array;
      await session.release();
      const replies = await Promise.all(Array.from({ length: 4 }, () => infer(`${server.url}/v2/models/${name}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, SHAPE.inputs], data: row }] })));
      for (const { reply, response } of replies) {
        assert.equal(reply.status, 200, reply.text);
        const got = Array.from(response!.outputs[0]!.data as ArrayLike<number>);
        assert.equal(got.length, SHAPE.outputs);
        got.forEach((v, i) => assert.ok(Math.abs(v - expected[i]!) <= 1e-5 * Math.max(1, Math.abs(expected[i]!)), `${name} output ${i}: ${v}, expected ${expected[i]}`));
        outputs.add(JSON.stringify(got));
      }
    }
    assert.equal(outputs.size, MODELS, "each model answers with its own weights");
  });

  // The pool with its models holds about 150 MiB here; a worker per model, or a runaway heap,
  // would hold several times that.
  test("holds the models in well under a worker each", { skip: !LINUX || RUNTIME !== "node" ? "reads /proc, with bounds for Node" : false }, () => {
    const mib = residentMiB(server.proc.pid!);
    assert.ok(mib < 400, `the server holds ${mib.toFixed(0)} MiB with ${MODELS} models on 2 workers`);
  });
});

describe("glibc's malloc in the processes Shoal starts", { skip: !LINUX ? "glibc tunables are read on Linux" : false }, () => {
  const repo = new ModelRepo();
  const servers: ServerProcess[] = [];

  before(() => {
    repo.mlp("mlp", "", { ...SHAPE, seed: 7 });
    repo.settings("mlp", { name: "mlp", runtime: "onnx" });
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    repo.remove();
  });

  const workerEnvironments = async (env: Record<string, string>) => {
    const server = await serveRepository(repo.dir, ["--workers", "2", "--model-isolation", "process"], env);
    servers.push(server);
    const answer = await infer(`${server.url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, SHAPE.inputs], data: row }] });
    assert.equal(answer.reply.status, 200, answer.reply.text);
    const workers = await waitFor("two worker processes", () => {
      const pids = childPids(server.proc.pid!);
      return pids.length >= 2 ? pids : undefined;
    });
    return { server, workers: workers.map(environ) };
  };

  // glibc may rewrite the variable in place as it reads it (2.36 keeps only the first tunable in
  // what /proc shows, and applies all): the mmap threshold, the one that matters, comes first.
  const tuned = (env: string[]) => env.some((v) => v.startsWith("GLIBC_TUNABLES=glibc.malloc.mmap_threshold=") && `GLIBC_TUNABLES=${MALLOC_TUNABLES}`.startsWith(v));

  test("worker processes start with the tunables for many models", async () => {
    const { workers } = await workerEnvironments({});
    for (const env of workers) assert.ok(tuned(env), env.filter((v) => v.startsWith("GLIBC")).join(", ") || "no GLIBC_TUNABLES");
  });

  test("malloc settings of the environment are kept as they are", async () => {
    const { server, workers } = await workerEnvironments({ GLIBC_TUNABLES: "glibc.malloc.mmap_threshold=1048576" });
    for (const env of [environ(server.proc.pid!), ...workers]) assert.ok(env.includes("GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576"), env.filter((v) => v.startsWith("GLIBC")).join(", "));
  });

  // Node 22.15 and later replace the process in place: the same pid, now with the tunables.
  const execve = typeof (process as { execve?: unknown }).execve === "function" && RUNTIME === "node";
  test("shoal serve starts itself again with them where Node can", { skip: execve ? false : "this Node has no process.execve" }, async () => {
    const server = await serveRepository(repo.dir, ["--workers", "1"]);
    servers.push(server);
    assert.ok(tuned(environ(server.proc.pid!)), environ(server.proc.pid!).filter((v) => v.startsWith("GLIBC")).join(", ") || "no GLIBC_TUNABLES");
    const answer = await infer(`${server.url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, SHAPE.inputs], data: row }] });
    assert.equal(answer.reply.status, 200, answer.reply.text);
  });

  // The same start caps V8's semi-spaces at Node 20's 16 MiB, unless the user sized them.
  const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  test("and with V8's semi-spaces at 16 MiB, unless NODE_OPTIONS sizes them", { skip: execve ? false : "this Node has no process.execve" }, async () => {
    const capped = await serveRepository(repo.dir, ["--workers", "1"]);
    const sized = await serveRepository(repo.dir, ["--workers", "1"], { NODE_OPTIONS: "--max-semi-space-size=4" });
    servers.push(capped, sized);
    assert.ok(cmdline(capped.proc.pid!).includes("--max-semi-space-size=16"), cmdline(capped.proc.pid!).join(" "));
    assert.ok(!cmdline(sized.proc.pid!).some((arg) => arg.startsWith("--max-semi-space-size")), cmdline(sized.proc.pid!).join(" "));
    assert.ok(tuned(environ(sized.proc.pid!)), "still started again with the malloc tunables");
  });
});
