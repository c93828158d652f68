/**
 * The V2 REST endpoints over a model repository served by `shoal serve --model-repository`:
 * health, server and model metadata, inference in JSON and in binary (numbers and BYTES, mixed
 * with JSON tensors), requested outputs, parameters, ids, configuration, statistics, the
 * repository index, and the errors of each.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as ort from "onnxruntime-node";
import { assertError, post, send, sleep, type ServerProcess } from "./helpers.js";
import { ModelRepo, infer, serveRepository } from "./model-helpers.js";

const INPUTS = 4;

describe("V2 REST endpoints", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;
  const sessions: Record<string, ort.InferenceSession> = {};

  // The MLP version run in this process.
  async function reference(version: string, rows: number[][]): Promise<number[]> {
    const out = await sessions[version]!.run({ input: new ort.Tensor("float32", Float32Array.from(rows.flat()), [rows.length, INPUTS]) });
    return Array.from(out.output!.data as Float32Array);
  }

  function assertClose(actual: ArrayLike<number>, expected: number[]): void {
    assert.equal(actual.length, expected.length);
    expected.forEach((v, i) => assert.ok(Math.abs(actual[i]! - v) <= 1e-5 * Math.max(1, Math.abs(v)), `[${i}] ${actual[i]} != ${v}`));
  }

  before(async () => {
    repo.mlp("mlp", "1", { inputs: INPUTS, hidden: 8, layers: 1, outputs: 3, seed: 1 });
    repo.mlp("mlp", "2", { inputs: INPUTS, hidden: 8, layers: 1, outputs: 2, seed: 2 });
    repo.settings("mlp", { name: "mlp", runtime: "onnx", maxBatchSize: 8, maxWaitMs: 2 });
    repo.module("upper", "upper.ts", {
      parameters: { prefix: ">" },
      inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
      outputs: [
        { name: "upper", datatype: "BYTES", shape: [-1] },
        { name: "length", datatype: "INT32", shape: [-1] },
      ],
    });
    repo.module("scale", "scale.ts", { maxBatchSize: 4, maxWaitMs: 2, parameters: { factor: 2 } });
    repo.settings("broken", { name: "broken", runtime: "onnx", maxBatchSize: "many" });
    for (const version of ["1", "2"]) sessions[version] = await ort.InferenceSession.create(join(repo.dir, "mlp", version, "model.onnx"));
    server = await serveRepository(repo.dir, ["--workers", "2", "--max-request-size", "100000", "--model-control", "explicit"]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("GET /v2 names the server and its extensions", async () => {
    const reply = await send(`${url}/v2`);
    assert.equal(reply.status, 200);
    assert.equal(reply.json.name, "shoal");
    assert.match(reply.json.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(reply.json.extensions, ["binary_tensor_data", "model_repository", "model_configuration", "statistics"]);
  });

  test("health: live and ready once every model is loaded", async () => {
    assert.deepEqual((await send(`${url}/v2/health/live`)).json, { live: true });
    const ready = await send(`${url}/v2/health/ready`);
    assert.equal(ready.status, 200, ready.text);
    assert.deepEqual(ready.json, { ready: true });
    assert.equal((await send(`${url}/readyz`)).status, 200);
  });

  test("model metadata comes from what the workers loaded; the default version is the newest", async () => {
    const latest = await send(`${url}/v2/models/mlp`);
    assert.equal(latest.status, 200, latest.text);
    assert.deepEqual(latest.json, {
      name: "mlp",
      versions: ["1", "2"],
      platform: "onnxruntime_onnx",
      inputs: [{ name: "input", datatype: "FP32", shape: [-1, INPUTS] }],
      outputs: [{ name: "output", datatype: "FP32", shape: [-1, 2] }],
    });
    const first = await send(`${url}/v2/models/mlp/versions/1`);
    assert.deepEqual(first.json.outputs, [{ name: "output", datatype: "FP32", shape: [-1, 3] }]);
    const upper = await send(`${url}/v2/models/upper`);
    assert.deepEqual(upper.json.inputs, [{ name: "text", datatype: "BYTES", shape: [-1] }]);
  });

  test("model readiness, per model and per version", async () => {
    for (const path of ["/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready", "/v2/models/upper/ready"]) {
      const reply = await send(`${url}${path}`);
      assert.equal(reply.status, 200, `${path}: ${reply.text}`);
      assert.equal(reply.json.ready, true);
    }
  });

  test("unknown models and versions are 404, whatever the endpoint", async () => {
    assertError(await send(`${url}/v2/models/nope`), 404, "not found: model 'nope'");
    assertError(await send(`${url}/v2/models/nope/ready`), 404, "not found: model 'nope'");
    assertError(await post(`${url}/v2/models/nope/infer`, { inputs: [] }), 404, "not found: model 'nope'");
    assertError(await send(`${url}/v2/models/mlp/versions/9`), 404, "not found: model 'mlp' has no version '9'");
    assertError(await post(`${url}/v2/models/mlp/versions/9/infer`, { inputs: [] }), 404, "not found: model 'mlp' has no version '9'");
    assertError(await send(`${url}/v2/models/broken`), 404, "not found: model 'broken'");
    assertError(await send(`${url}/v2/models/nope/config`), 404, "not found: model 'nope'");
    assertError(await send(`${url}/v2/models/nope/stats`), 404, "not found: model 'nope'");
    assertError(await send(`${url}/v2/models/mlp/versions/9/stats`), 404, "not found: model 'mlp' has no version '9'");
    assertError(await send(`${url}/v2/elsewhere`), 404, "not found: /v2/elsewhere");
  });

  test("wrong methods are 405 with Allow", async () => {
    const metadata = await send(`${url}/v2/models/mlp`, { method: "POST", body: "{}" });
    assertError(metadata, 405, "method not allowed: POST /v2/models/mlp; use GET");
    assert.equal(metadata.headers.get("allow"), "GET, HEAD");
    const inference = await send(`${url}/v2/models/mlp/infer`);
    assertError(inference, 405, "method not allowed: GET /v2/models/mlp/infer; use POST");
    assert.equal(inference.headers.get("allow"), "POST");
    assertError(await send(`${url}/v2/repository/index`), 405, "method not allowed: GET /v2/repository/index; use POST");
  });

  test("JSON inference on each version matches onnxruntime, rows and id included", async () => {
    const rows = [
      [0.1, 0.2, 0.3, 0.4],
      [-1, 0.5, 2, 0],
    ];
    for (const [path, version] of [["/v2/models/mlp", "2"], ["/v2/models/mlp/versions/1", "1"]] as const) {
      const reply = await post(`${url}${path}/infer`, { id: "req-7", inputs: [{ name: "input", datatype: "FP32", shape: [2, INPUTS], data: rows.flat() }] });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.headers.get("content-type"), "application/json");
      assert.equal(reply.headers.get("inference-header-content-length"), null);
      assert.equal(reply.json.model_name, "mlp");
      assert.equal(reply.json.model_version, version);
      assert.equal(reply.json.id, "req-7");
      const [output] = reply.json.outputs;
      assert.equal(output.name, "output");
      assert.equal(output.datatype, "FP32");
      assert.deepEqual(output.shape, [2, version === "1" ? 3 : 2]);
      assertClose(output.data, await reference(version, rows));
    }
  });

  test("concurrent requests of several rows are batched and each gets its own rows back", async () => {
    const requests = Array.from({ length: 12 }, (_, i) => Array.from({ length: 1 + (i % 3) }, (_, r) => [i, r, -i, 0.5]));
    const replies = await Promise.all(requests.map((rows) => infer(`${url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [rows.length, INPUTS], data: Float32Array.from(rows.flat()) }] }, true)));
    for (const [i, { reply, response }] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      assertClose(response!.outputs[0]!.data as Float32Array, await reference("2", requests[i]!));
    }
  });

  test("binary data both ways: binary inputs, and binary outputs with Inference-Header-Content-Length", async () => {
    const rows = [[1, 2, 3, 4]];
    const request = { inputs: [{ name: "input", datatype: "FP32" as const, shape: [1, INPUTS], data: Float32Array.from(rows.flat()) }], parameters: { binary_data_output: true } };
    const { reply, response } = await infer(`${url}/v2/models/mlp/versions/1/infer`, request, true);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/octet-stream");
    const headerLength = Number(reply.headers.get("inference-header-content-length"));
    const header = JSON.parse(Buffer.from(reply.body.subarray(0, headerLength)).toString("utf8"));
    assert.deepEqual(header.outputs[0].parameters, { binary_data_size: 12 });
    assert.equal(reply.body.byteLength, headerLength + 12);
    assertClose(response!.outputs[0]!.data as Float32Array, await reference("1", rows));
  });

  test("BYTES through a module runtime: binary in, a mix of binary and JSON outputs, parameters passed", async () => {
    const text = ["héllo", "", "shoal"].map((w) => new TextEncoder().encode(w));
    const { reply, response } = await infer(
      `${url}/v2/models/upper/infer`,
      {
        id: "bytes-1",
        parameters: { suffix: "!" },
        inputs: [{ name: "text", datatype: "BYTES", shape: [3], data: text }],
        outputs: [{ name: "upper", parameters: { binary_data: true } }, { name: "length" }],
      },
      true,
    );
    assert.equal(reply.status, 200, reply.text);
    const headerLength = Number(reply.headers.get("inference-header-content-length"));
    const header = JSON.parse(Buffer.from(reply.body.subarray(0, headerLength)).toString("utf8"));
    assert.equal(header.id, "bytes-1");
    assert.ok(header.outputs[0].parameters.binary_data_size > 0, "upper is binary");
    assert.deepEqual(header.outputs[1].data, [7, 2, 7], "length is JSON");
    const words = (response!.outputs[0]!.data as Uint8Array[]).map((b) => new TextDecoder().decode(b));
    assert.deepEqual(words, [">HÉLLO!", ">!", ">SHOAL!"]);
  });

  test("requested outputs are the ones sent back, in the order asked; an unknown one is 400", async () => {
    const text = { name: "text", datatype: "BYTES", shape: [1], data: ["a"] };
    const one = await post(`${url}/v2/models/upper/infer`, { inputs: [text], outputs: [{ name: "length" }] });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.json.outputs.map((o: { name: string }) => o.name), ["length"]);
    const both = await post(`${url}/v2/models/upper/infer`, { inputs: [text], outputs: [{ name: "length" }, { name: "upper" }] });
    assert.deepEqual(both.json.outputs.map((o: { name: string }) => o.name), ["length", "upper"]);
    assertError(await post(`${url}/v2/models/upper/infer`, { inputs: [text], outputs: [{ name: "nope" }] }), 400, /has no output 'nope'/);
  });

  test("malformed requests are 400 naming what is wrong; the rest of a batch goes on", async () => {
    const good = { inputs: [{ name: "input", datatype: "FP32", shape: [1, INPUTS], data: [1, 2, 3, 4] }] };
    const [bad, fine, wrongType, wrongShape, notJson] = await Promise.all([
      post(`${url}/v2/models/mlp/infer`, { inputs: [{ name: "inptu", datatype: "FP32", shape: [1, INPUTS], data: [1, 2, 3, 4] }] }),
      post(`${url}/v2/models/mlp/infer`, good),
      post(`${url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "INT32", shape: [1, INPUTS], data: [1, 2, 3, 4] }] }),
      post(`${url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] }] }),
      post(`${url}/v2/models/mlp/infer`, "{not json"),
    ]);
    assertError(bad, 400, /unknown input 'inptu'/);
    assert.equal(fine.status, 200, fine.text);
    assertError(wrongType, 400, "bad request: input 'input' is INT32; the model takes FP32");
    assertError(wrongShape, 400, /input 'input'/);
    assertError(notJson, 400, /JSON/);
    assertError(await post(`${url}/v2/models/mlp/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [2, 2], data: [1] }] }), 400, /input 'input'/);
    assertError(await post(`${url}/v2/models/mlp/infer`, good, { "inference-header-content-length": "99999" }), 400, /inference-header-content-length/i);
  });

  test("the core table's statuses: empty body 400, too large 413", async () => {
    assertError(await post(`${url}/v2/models/mlp/infer`, ""), 400, "bad request: empty request body");
    assertError(await post(`${url}/v2/models/mlp/infer`, "x".repeat(200_000)), 413, "request body is too large: the limit is 100000 bytes");
  });

  test("config shows the settings; stats count requests and batches in Triton's shape", async () => {
    const config = await send(`${url}/v2/models/scale/config`);
    assert.equal(config.status, 200, config.text);
    assert.equal(config.json.name, "scale");
    assert.equal(config.json.maxBatchSize, 4);
    assert.deepEqual(config.json.parameters, { factor: 2 });
    const x = { name: "x", datatype: "FP32", shape: [2], data: [1, 2] };
    const replies = await Promise.all(Array.from({ length: 6 }, () => post(`${url}/v2/models/scale/infer`, { inputs: [x] })));
    for (const reply of replies) assert.deepEqual(reply.json.outputs[0].data, [2, 4], reply.text);
    const stats = (await send(`${url}/v2/models/scale/stats`)).json.model_stats[0];
    assert.equal(stats.name, "scale");
    assert.equal(stats.inference_count, 6);
    assert.equal(stats.inference_stats.success.count, 6);
    assert.equal(stats.inference_stats.queue.count, 6);
    assert.ok(stats.inference_stats.compute_infer.ns > 0);
    const batched = stats.batch_stats.reduce((n: number, b: { batch_size: number; compute_infer: { count: number } }) => n + b.batch_size * b.compute_infer.count, 0);
    assert.equal(batched, 6);
    const all = (await send(`${url}/v2/models/stats`)).json.model_stats.map((s: { name: string; version: string }) => `${s.name}/${s.version}`);
    assert.deepEqual(all.sort(), ["mlp/1", "mlp/2", "scale/", "upper/"]);
  });

  test("the repository index lists every model, and the broken settings file with its field", async () => {
    const index = await post(`${url}/v2/repository/index`, {});
    assert.equal(index.status, 200, index.text);
    const byName = new Map(index.json.map((e: { name: string; version?: string }) => [`${e.name}/${e.version ?? ""}`, e]));
    assert.deepEqual(byName.get("mlp/1"), { name: "mlp", version: "1", state: "READY", reason: "" });
    assert.deepEqual(byName.get("upper/"), { name: "upper", state: "READY", reason: "" });
    const broken = byName.get("broken/") as { state: string; reason: string };
    assert.equal(broken.state, "UNAVAILABLE");
    assert.match(broken.reason, /broken\/model-settings\.json: maxBatchSize: /);
    const ready = await post(`${url}/v2/repository/index`, { ready: true });
    assert.ok(ready.json.every((e: { state: string }) => e.state === "READY"));
    assert.equal(ready.json.length, 4);
    assertError(await post(`${url}/v2/repository/index`, "[1"), 400, /not JSON/);
    assertError(await post(`${url}/v2/repository/models/broken/load`, ""), 400, /maxBatchSize/);
    assertError(await post(`${url}/v2/repository/models/nope/load`, ""), 404, "not found: model 'nope'");
    assertError(await post(`${url}/v2/repository/models/nope/unload`, ""), 404, "not found: model 'nope' is not loaded");
  });

  test("a model's own metrics show in /metrics, labelled with the model and the worker", async () => {
    // Workers report their metrics every 250 ms.
    let text = "";
    const end = Date.now() + 5000;
    while (!/^upper_words_total\{model="upper",worker="\d"\} [1-9]/m.test(text) && Date.now() < end) {
      await sleep(100);
      text = (await send(`${url}/metrics`)).text;
    }
    assert.match(text, /^upper_words_total\{model="upper",worker="\d"\} [1-9]/m);
    assert.match(text, /^shoal_stage_batch_size_count\{model="mlp\/2"\} [1-9]/m);
    // Model queues show beside the stages': their depth (nothing waits now) and the workers that hold them.
    assert.match(text, /^shoal_stage_queue_depth\{model="mlp\/2"\} 0$/m);
    assert.match(text, /^shoal_stage_live_workers\{model="mlp\/2"\} [1-9]$/m);
    assert.match(text, /^shoal_stage_queue_wait_seconds_count\{model="upper"\} [1-9]/m);
  });

  test("the log names the broken settings file and field, and the other models loaded", () => {
    const lines = server.logs();
    assert.ok(lines.some((l) => l.level === 50 && /broken\/model-settings\.json: maxBatchSize/.test(l.msg ?? "")), server.describe());
    const loaded = lines.filter((l) => l.msg === "model loaded").map((l) => l.model);
    assert.deepEqual(new Set(loaded), new Set(["mlp/1", "mlp/2", "upper", "scale"]));
  });
});
