/**
 * `shoal bench` against real servers in subprocesses, with short windows: a plain route, a V2
 * model over REST JSON, REST binary and gRPC (its inputs made from the model's metadata or read
 * from a file), a Poisson rate sweep, a streamed OpenAI route (the tiny decoder), and a target
 * that refuses; its CSV, JSON and plot checked.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { makeTinyGpt } from "../examples/generate/make-model.js";
import { assertLevels, bench } from "./bench-helpers.js";
import { startClientServer } from "./client-helpers.js";
import { freePort } from "./grpc-helpers.js";
import { ROOT, startServer, type ServerProcess } from "./helpers.js";
import { ModelRepo } from "./model-helpers.js";

const SHORT = ["--window", "0.3", "--max-windows", "4"];

describe("shoal bench against Shoal", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let grpcPort: number;
  const dir = mkdtempSync(join(tmpdir(), "shoal-bench-test-"));

  before(async () => {
    repo.module("scale", "scale.ts", { maxBatchSize: 8, maxWaitMs: 2, parameters: { factor: 2 }, inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3] }] });
    grpcPort = await freePort();
    server = await startClientServer(repo, ["--grpc-port", String(grpcPort)]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a plain route: a row per concurrency level, the CSV's columns, the table", async () => {
    const run = await bench([`${server.url}/double`, "--body", '{"x": 2}', "--concurrency", "1,4", ...SHORT]);
    assertLevels(run, [
      ["concurrency", "1"],
      ["concurrency", "4"],
    ]);
    assert.deepEqual(Object.keys(run.csv[0]!), ["mode", "level", "requests", "req_per_sec", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "errors", "error_kinds", "batch_size", "queue_ms", "windows", "stable"]);
    assert.match(run.stdout, /^mode +level +req\/s +p50 ms +p90 ms +p99 ms/);
    // The server counted its queue: Shoal's /metrics was read.
    assert.ok(Number(run.csv[0]!.queue_ms) >= 0 && run.csv[0]!.queue_ms !== "", JSON.stringify(run.csv[0]));
  });

  test("a V2 model over REST JSON, inputs from its metadata: the server's batch sizes", async () => {
    const run = await bench([`${server.url}/v2/models/scale`, "--concurrency", "2,8", ...SHORT]);
    assertLevels(run, [
      ["concurrency", "2"],
      ["concurrency", "8"],
    ]);
    for (const row of run.csv) assert.ok(Number(row.batch_size) >= 1 && Number(row.batch_size) <= 8, JSON.stringify(row));
    // Eight in flight on a batching model: batches of more than one.
    assert.ok(Number(run.csv[1]!.batch_size) > 1, JSON.stringify(run.csv[1]));
    assert.match(run.stdout, /batch +queue ms/);
  });

  test("binary tensors, and a Poisson rate sweep", async () => {
    const run = await bench(["scale", "--url", server.url, "--protocol", "binary", "--rate", "50,100", ...SHORT]);
    assertLevels(run, [
      ["rate", "50"],
      ["rate", "100"],
    ]);
    // An open loop sends what was asked, give or take the draw of arrivals.
    assert.ok(Number(run.csv[1]!.req_per_sec) > 50 && Number(run.csv[1]!.req_per_sec) < 200, JSON.stringify(run.csv[1]));
  });

  test("gRPC, with the request read from a file", async () => {
    const file = join(dir, "request.json");
    writeFileSync(file, JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [2, 3], data: [[1, 2, 3], [4, 5, 6]] }] }));
    const run = await bench(["scale", "--url", server.url, "--protocol", "grpc", "--grpc-url", `127.0.0.1:${grpcPort}`, "--input-file", file, "--concurrency", "1,4", ...SHORT]);
    assertLevels(run, [
      ["concurrency", "1"],
      ["concurrency", "4"],
    ]);
  });

  test("a target that refuses stops the run with the server's message", async () => {
    const missing = await bench([`${server.url}/v2/models/nope`, ...SHORT]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /error: .*nope/);
    const wrongShape = await bench(["scale", "--url", server.url, "--shape", "x=2,5", ...SHORT]);
    assert.equal(wrongShape.code, 1);
    assert.match(wrongShape.stderr, /error: .*x/);
    assert.equal(wrongShape.csv.length, 0);
  });
});

describe("shoal bench against a streamed OpenAI route", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-bench-tiny-gpt-"));
  let server: ServerProcess;

  before(async () => {
    makeTinyGpt(dir);
    server = await startServer(join(ROOT, "examples", "generate", "server.ts"), { env: { MODEL_DIR: dir } });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("time to first token, inter-token latency, tokens a second", async () => {
    const run = await bench([`${server.url}/v1/completions`, "--max-tokens", "8", "--ignore-eos", "--concurrency", "1,2", ...SHORT]);
    assertLevels(run, [
      ["concurrency", "1"],
      ["concurrency", "2"],
    ]);
    for (const row of run.csv) {
      assert.ok(Number(row.ttft_p50_ms) > 0 && Number(row.ttft_p50_ms) <= Number(row.p50_ms), JSON.stringify(row));
      assert.ok(Number(row.itl_p50_ms) > 0 && Number(row.tpot_p50_ms) > 0, JSON.stringify(row));
    }
    // 8 tokens per request, EOS or not.
    for (const r of run.json.results as { requestsPerSec: number; stream: { tokensPerSec: number } }[]) assert.ok(Math.abs(r.stream.tokensPerSec / r.requestsPerSec - 8) < 1e-6, JSON.stringify(r));
    assert.match(run.stdout, /TTFT p50 +TTFT p99 +ITL p50/);
  });
});
