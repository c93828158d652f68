/**
 * MLServer's runtimes served unchanged: a repository in MLServer's own format
 * (test/fixtures/mlserver-repo: `settings.json`, and `model-settings.json` files naming `MLModel`
 * subclasses, written after the models of MLServer's tests/fixtures.py), run by Python workers of
 * the shared pool with the `mlserver` package's types, and the expectations of MLServer's
 * tests/rest/test_endpoints.py and tests/grpc/test_servicers.py that apply, over REST and gRPC.
 * The Python is the benchmarks' venv with MLServer 1.7 (python-helpers.ts); the tests do not
 * depend on the runtime under test, so they run in the suite's first run only.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RAN_ONCE, fixture, post, send, type Reply, type ServerProcess } from "./helpers.js";
import { V2Client, freePort } from "./grpc-helpers.js";
import { serveRepository } from "./model-helpers.js";
import { mlserverPython } from "./python-helpers.js";

const python = RAN_ONCE === undefined ? mlserverPython() : { skip: RAN_ONCE };
const SUM_REQUEST = { inputs: [{ name: "input-0", shape: [1, 3], datatype: "INT32", data: [1, 2, 3] }] };
const PROMPT = { inputs: [{ name: "prompt", shape: [1], datatype: "BYTES", data: ["What is the capital of France?"], parameters: { content_type: "str" } }], outputs: [{ name: "output" }] };
const WORDS = ["What", " is", " the", " capital", " of", " France?"];
const GRPC_SUM = { model_name: "sum-model", model_version: "v1.2.3", inputs: [{ name: "input-0", datatype: "INT32", shape: [1, 3], contents: { int_contents: [1, 2, 3] }, parameters: { content_type: { string_param: "np" } } }] };

// The data of each event of a Server-Sent Events body.
const events = (reply: Reply) => reply.text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => JSON.parse(e.slice(6)));

describe("MLServer runtimes on Shoal", { skip: python.skip ?? false }, () => {
  let server: ServerProcess;
  let grpc: V2Client;
  let url: string;

  before(async () => {
    const port = await freePort();
    server = await serveRepository(fixture("mlserver-repo"), ["--model-control", "explicit"], { ...("env" in python ? python.env : {}), SHOAL_GRPC_PORT: String(port) });
    url = server.url;
    grpc = new V2Client(port);
  });
  after(async () => {
    grpc?.close();
    await server?.stop();
  });

  test("health, model readiness and metadata as the settings declare them", async () => {
    assert.equal((await send(`${url}/v2/health/live`)).status, 200);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200);
    assert.equal((await send(`${url}/v2/models/sum-model/versions/v1.2.3/ready`)).status, 200);
    const metadata = (await send(`${url}/v2/models/sum-model`)).json;
    assert.equal(metadata.name, "sum-model");
    assert.equal(metadata.platform, "mlserver");
    assert.deepEqual(metadata.inputs, [{ name: "input-0", datatype: "FP32", shape: [128] }]);
  });

  test("infer, with the version and without: the sum, its id, and headers as MLServer sends them", async () => {
    for (const path of ["/v2/models/sum-model/infer", "/v2/models/sum-model/versions/v1.2.3/infer"]) {
      const reply = await post(`${url}${path}`, SUM_REQUEST, { "x-foo": "bar" });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.outputs.length, 1);
      assert.deepEqual(reply.json.outputs[0], { name: "total", shape: [1, 1], datatype: "INT64", parameters: { content_type: "np" }, data: [6] });
      assert.equal(reply.json.model_name, "sum-model");
      assert.equal(reply.json.model_version, "v1.2.3");
      // A request without an id gets a new one, in the answer and its CloudEvents headers.
      assert.match(reply.json.id, /^[0-9a-f-]{36}$/);
      assert.equal(reply.headers.get("ce-id"), reply.json.id);
      assert.equal(reply.headers.get("x-foo"), "bar");
      assert.equal(reply.headers.get("ce-specversion"), "0.3");
    }
    assert.equal((await post(`${url}/v2/models/sum-model/infer`, { id: "mine", ...SUM_REQUEST })).json.id, "mine");
  });

  test("adaptive batching: concurrent requests are merged into one predict() and split back, each with its own id", async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post(`${url}/v2/models/sum-model/infer`, { id: `r${i}`, inputs: [{ name: "input-0", shape: [2, 2], datatype: "FP32", data: [i, 1, 2, 3] }] })),
    );
    replies.forEach((reply, i) => {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.id, `r${i}`);
      assert.deepEqual(reply.json.outputs[0].data, [i + 1, 5]);
      assert.deepEqual(reply.json.outputs[0].shape, [2, 1]);
    });
    const stats = (await send(`${url}/v2/models/sum-model/stats`)).json.model_stats[0];
    const sizes = stats.batch_stats.map((b: { batch_size: number }) => b.batch_size);
    assert.ok(Math.max(...sizes) > 1, `no batch held two requests: ${JSON.stringify(sizes)}`);
    assert.ok(Math.max(...sizes) <= 10, `a batch above max_batch_size: ${JSON.stringify(sizes)}`);
  });

  test("generate is infer, and infer_stream and generate_stream stream V2 responses as events", async () => {
    const generated = await post(`${url}/v2/models/text-model/versions/v1.2.3/generate`, PROMPT);
    assert.equal(generated.status, 200, generated.text);
    assert.deepEqual(generated.json.outputs[0].data, ["What is the capital of France?"]);
    for (const endpoint of ["infer_stream", "generate_stream"]) {
      const reply = await post(`${url}/v2/models/text-stream-model/${endpoint}`, PROMPT);
      assert.equal(reply.status, 200, reply.text);
      assert.match(reply.headers.get("content-type") ?? "", /^text\/event-stream/);
      assert.deepEqual(events(reply).map((e) => e.outputs[0].data[0]), WORDS);
    }
    // A model that does not stream answers a stream with predict() once.
    assert.deepEqual(events(await post(`${url}/v2/models/sum-model/infer_stream`, SUM_REQUEST)).map((e) => e.outputs[0].data), [[6]]);
  });

  test("errors: an unknown model or version is a 404, ErrorModel's MLServerError a 400, a bad datatype a 422", async () => {
    assert.equal((await post(`${url}/v2/models/my-model/versions/v0/infer`, SUM_REQUEST)).status, 404);
    assert.equal((await post(`${url}/v2/models/sum-model/versions/v0/infer`, SUM_REQUEST)).status, 404);
    const failed = await post(`${url}/v2/models/error-model/infer`, SUM_REQUEST);
    assert.equal(failed.status, 400);
    assert.match(failed.json.error, /something really bad happened$/);
    const badType = await post(`${url}/v2/models/sum-model/infer`, { inputs: [{ ...SUM_REQUEST.inputs[0], datatype: "INT322" }] });
    assert.equal(badType.status, 422);
    assert.match(badType.json.error, /Input should be 'BOOL', 'UINT8', .* or 'BYTES'/);
  });

  test("declared inputs are documentation, unless the settings' strict_inputs turns Shoal's checks on", async () => {
    // sum-model declares FP32 [128], and takes INT32 [1, 3] all the same, as MLServer does.
    assert.equal((await post(`${url}/v2/models/sum-model/infer`, SUM_REQUEST)).status, 200);
    assert.deepEqual((await post(`${url}/v2/models/strict-sum-model/infer`, SUM_REQUEST)).json.outputs[0].data, [6]);
    const refused = [
      [{ ...SUM_REQUEST.inputs[0], datatype: "FP32" }, "bad request: input 'input-0' is FP32, and the model takes INT32"],
      [{ ...SUM_REQUEST.inputs[0], shape: [3, 1] }, "bad request: input 'input-0' has shape [3, 1], and the model takes [-1, 3]"],
      [{ ...SUM_REQUEST.inputs[0], name: "x" }, "bad request: unknown input 'x': the model takes input-0"],
    ] as const;
    for (const [input, error] of refused) {
      const reply = await post(`${url}/v2/models/strict-sum-model/infer`, { inputs: [input] });
      assert.equal(reply.status, 400, reply.text);
      assert.equal(reply.json.error, error);
    }
  });

  test("the repository: every settings file indexed, a load that fails says why, unload and load", async () => {
    const index = (await post(`${url}/v2/repository/index`, {})).json as { name: string; version?: string; state: string; reason: string }[];
    assert.deepEqual(index.map((e) => [e.name, e.version, e.state]).sort(), [
      ["error-model", "v1.2.3", "READY"],
      ["load-error-model", "v1.2.3", "UNAVAILABLE"],
      ["strict-sum-model", undefined, "READY"],
      ["sum-model", "v1.2.3", "READY"],
      ["text-model", "v1.2.3", "READY"],
      ["text-stream-model", "v1.2.3", "READY"],
    ]);
    assert.equal(index.find((e) => e.name === "load-error-model")!.reason, "something really bad happened");
    const load = await post(`${url}/v2/repository/models/load-error-model/load`, {});
    assert.equal(load.status, 400);
    assert.match(load.json.error, /something really bad happened/);
    assert.equal((await post(`${url}/v2/repository/models/my-model/load`, {})).status, 404);
    assert.equal((await post(`${url}/v2/repository/models/text-model/unload`, {})).status, 200);
    assert.equal((await send(`${url}/v2/models/text-model`)).status, 404);
    assert.equal((await post(`${url}/v2/repository/models/text-model/load`, {})).status, 200);
    assert.equal((await send(`${url}/v2/models/text-model`)).status, 200);
  });

  test("gRPC: readiness, metadata, ModelInfer with typed and raw contents, the repository, and the errors' codes", async () => {
    assert.equal((await grpc.call("ServerLive", {})).live, true);
    assert.equal((await grpc.call("ServerReady", {})).ready, true);
    assert.equal((await grpc.call("ModelReady", { name: "sum-model", version: "v1.2.3" })).ready, true);
    const metadata = await grpc.call("ModelMetadata", { name: "sum-model", version: "v1.2.3" });
    assert.equal(metadata.name, "sum-model");
    assert.equal(metadata.platform, "mlserver");
    const raw = Buffer.alloc(12);
    [1, 2, 3].forEach((v, i) => raw.writeInt32LE(v, 4 * i));
    const { contents: _typed, ...rawInput } = GRPC_SUM.inputs[0]!;
    for (const request of [GRPC_SUM, { ...GRPC_SUM, model_version: "", inputs: [rawInput], raw_input_contents: [raw] }]) {
      const answer = await grpc.call("ModelInfer", request);
      assert.equal(answer.outputs.length, 1);
      assert.equal(answer.outputs[0].datatype, "INT64");
      assert.equal((answer.raw_output_contents[0] as Buffer).readBigInt64LE(0), 6n);
    }
    const stream = await grpc.call("ModelInfer", { model_name: "text-stream-model", inputs: [{ name: "prompt", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("What is the capital of France?")] } }] });
    // gRPC takes one answer: the stream's responses joined.
    assert.deepEqual(stream.outputs[0].shape.map(Number), [6, 1]);
    assert.equal((await grpc.error("ModelInfer", { ...GRPC_SUM, model_name: "my-model" })).code, 5); // NOT_FOUND
    assert.equal((await grpc.error("ModelInfer", { ...GRPC_SUM, model_name: "error-model" })).code, 3); // INVALID_ARGUMENT
    assert.equal((await grpc.call("RepositoryIndex", {})).models.length, 6);
    await grpc.call("RepositoryModelUnload", { model_name: "sum-model" });
    assert.equal((await grpc.error("ModelMetadata", { name: "sum-model" })).code, 5);
    await grpc.call("RepositoryModelLoad", { model_name: "sum-model" });
    assert.equal((await grpc.call("ModelMetadata", { name: "sum-model" })).name, "sum-model");
    assert.equal((await grpc.error("RepositoryModelLoad", { model_name: "my-model" })).code, 5);
  });
});
