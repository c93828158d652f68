/**
 * `shoal/client`, `shoal/client/grpc` and `shoal bench` against a V2 server that is not Shoal:
 * MLServer 1.7 from PyPI (bench/requirements-mlserver.txt), from the benchmarks' venv
 * (bench/.venv), serving test/fixtures/mlserver. Outside CI it is skipped, saying so, when that
 * venv has no MLServer; in CI (CI=true, where .ci/run installs it) it fails instead. It does not
 * depend on the runtime under test, so it runs in the suite's first run only.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { Client, HttpError, outputOf, textOf } from "shoal/client";
import { GrpcClient, GrpcError } from "shoal/client/grpc";
import { venvBin } from "../bench/lib/peers.js";
import { assertLevels, bench } from "./bench-helpers.js";
import { fixture, RAN_ONCE, ROOT } from "./helpers.js";
import { startMLServer, type MLServerProcess } from "./python-helpers.js";

const MLSERVER = venvBin(ROOT, "mlserver");
const MISSING = existsSync(MLSERVER) ? undefined : "MLServer is not in bench/.venv: `npm run bench` makes that venv (bench/lib/peers.ts), or `python3 -m venv bench/.venv && bench/.venv/bin/pip install -r bench/requirements-mlserver.txt`";
const SKIP = RAN_ONCE ?? (process.env.CI === "true" ? false : MISSING ?? false);

// In CI the venv is made before the suite: a missing MLServer is a failure there, not a skip.
test("MLServer is installed where CI runs", { skip: RAN_ONCE ?? (process.env.CI === "true" ? false : "outside CI (CI=true): the tests below skip when MLServer is missing") }, () => {
  assert.equal(MISSING, undefined, MISSING);
});

describe("the client against MLServer", { skip: SKIP }, () => {
  let mlserver: MLServerProcess;
  let client: Client;
  let grpc: GrpcClient;
  let httpUrl: string;
  let grpcAddress: string;

  before(async () => {
    mlserver = await startMLServer(fixture("mlserver"), (url) => new Client(url).v2.modelReady("double"));
    httpUrl = mlserver.http;
    grpcAddress = mlserver.grpc;
    client = new Client(httpUrl);
    grpc = new GrpcClient(grpcAddress);
  });
  after(async () => {
    grpc?.close();
    await mlserver?.stop();
  });

  test("REST: health, metadata, inference with JSON tensors, errors", async () => {
    assert.equal(await client.v2.live(), true);
    assert.equal(await client.v2.ready(), true);
    assert.equal(await client.v2.modelReady("nope"), false);
    assert.equal((await client.v2.serverMetadata()).name, "mlserver");
    const meta = await client.v2.modelMetadata("double");
    assert.deepEqual(meta.inputs, [{ name: "x", datatype: "FP32", shape: [-1] }]);
    const response = await client.v2.infer("double", { id: "m1", inputs: [{ name: "x", data: Float32Array.of(1, 2.5) }, { name: "text", data: ["fish"] }] });
    assert.equal(response.model_name, "double");
    const y = outputOf(response, "y");
    assert.ok(y.data instanceof Float32Array);
    assert.deepEqual([...y.data], [2, 5]);
    assert.deepEqual(textOf(outputOf(response, "upper")), ["FISH"]);
    await assert.rejects(client.v2.infer("nope", { inputs: [{ name: "x", data: Float32Array.of(1) }] }), (err: unknown) => err instanceof HttpError && err.status === 404 && /nope/.test(err.message));
    // An extension MLServer does not have: FastAPI's `{"detail": ...}` is the message.
    await assert.rejects(client.v2.statistics("double"), { name: "HttpError", status: 404, message: "Not Found" });
  });

  test("REST: the repository index, unload and load", async () => {
    const index = await client.v2.repositoryIndex();
    assert.deepEqual(index.map((e) => [e.name, e.state]), [["double", "READY"]]);
    await client.v2.unload("double");
    assert.equal(await client.v2.modelReady("double"), false);
    await client.v2.load("double");
    assert.equal(await client.v2.modelReady("double"), true);
  });

  test("gRPC: health, metadata, inference (its outputs in typed contents or raw), errors", async () => {
    assert.equal(await grpc.live(), true);
    assert.equal(await grpc.ready(), true);
    assert.equal(await grpc.modelReady("double"), true);
    assert.equal((await grpc.serverMetadata()).name, "mlserver");
    assert.deepEqual((await grpc.modelMetadata("double")).outputs, [{ name: "y", datatype: "FP32", shape: [-1] }]);
    const response = await grpc.infer("double", { id: "g1", inputs: [{ name: "x", data: Float32Array.of(3, -1) }, { name: "text", data: ["chips"] }] });
    const y = outputOf(response, "y");
    assert.ok(y.data instanceof Float32Array);
    assert.deepEqual([...y.data], [6, -2]);
    assert.deepEqual(textOf(outputOf(response, "upper")), ["CHIPS"]);
    await assert.rejects(grpc.infer("nope", { inputs: [{ name: "x", data: Float32Array.of(1) }] }), (err: unknown) => err instanceof GrpcError && /nope/.test(err.details));
  });

  // MLServer has no binary tensor extension (it fails such a request with a 500): REST JSON and gRPC.
  test("shoal bench over REST and gRPC, inputs from MLServer's metadata; its /metrics is not Shoal's", async () => {
    const short = ["--window", "0.3", "--max-windows", "4", "--concurrency", "1,2", "--dynamic-size", "4"];
    for (const protocol of ["rest", "grpc"]) {
      const run = await bench(["double", "--url", httpUrl, "--protocol", protocol, "--grpc-url", grpcAddress, ...short]);
      assertLevels(run, [
        ["concurrency", "1"],
        ["concurrency", "2"],
      ]);
      assert.deepEqual(run.csv.map((r) => r.batch_size), ["", ""], protocol);
      assert.match(run.stdout, /no batch sizes or queue times/, protocol);
    }
  });
});
