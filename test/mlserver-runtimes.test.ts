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
import { execFileSync } from "node:child_process";
import { gzipSync } from "node:zlib";
import * as grpcJs from "@grpc/grpc-js";
import { V2Client, definition, freePort, type CallError } from "./grpc-helpers.js";
import { serveRepository } from "./model-helpers.js";
import { mlserverPython } from "./python-helpers.js";

const python = RAN_ONCE === undefined ? mlserverPython() : { skip: RAN_ONCE };
const SUM_REQUEST = { inputs: [{ name: "input-0", shape: [1, 3], datatype: "INT32", data: [1, 2, 3] }] };
const PROMPT = { inputs: [{ name: "prompt", shape: [1], datatype: "BYTES", data: ["What is the capital of France?"], parameters: { content_type: "str" } }], outputs: [{ name: "output" }] };
const WORDS = ["What", " is", " the", " capital", " of", " France?"];
const GRPC_SUM = { model_name: "sum-model", model_version: "v1.2.3", inputs: [{ name: "input-0", datatype: "INT32", shape: [1, 3], contents: { int_contents: [1, 2, 3] }, parameters: { content_type: { string_param: "np" } } }] };

const MLSERVER_ERROR = "mlserver.errors.MLServerError";
const DATATYPE_ERROR = "Input should be 'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64' or 'BYTES'";

// MLServer's ModelStreamInfer answers bare ModelInferResponse messages (its own proto): a client
// made of the method's path, with ModelInfer's message types.
function mlserverStream(port: number, request: object): Promise<{ responses: any[]; error?: CallError; trailers: grpcJs.Metadata }> {
  const infer = (definition["inference.GRPCInferenceService"] as any).ModelInfer;
  const Client = grpcJs.makeGenericClientConstructor({ ModelStreamInfer: { ...infer, path: "/inference.GRPCInferenceService/ModelStreamInfer", requestStream: true, responseStream: true } }, "Stream");
  const client = new Client(`127.0.0.1:${port}`, grpcJs.credentials.createInsecure()) as any;
  const call = client.ModelStreamInfer();
  const responses: any[] = [];
  return new Promise((resolve) => {
    call.on("data", (r: any) => responses.push(r));
    call.on("error", () => {});
    call.on("status", (status: grpcJs.StatusObject) => {
      client.close();
      const error = status.code === grpcJs.status.OK ? {} : { error: { code: status.code, details: status.details, metadata: status.metadata } };
      resolve({ responses, trailers: status.metadata, ...error });
    });
    call.write(request);
    call.end();
  });
}

// The data of each event of a Server-Sent Events body.
const events = (reply: Reply) => reply.text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => JSON.parse(e.slice(6)));

describe("MLServer runtimes on Shoal", { skip: python.skip ?? false }, () => {
  let server: ServerProcess;
  let grpc: V2Client;
  let url: string;
  let port: number;

  before(async () => {
    port = await freePort();
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
  });

  test("infer, with the version and without: the sum, its id, and headers as MLServer sends them", async () => {
    for (const path of ["/v2/models/sum-model/infer", "/v2/models/sum-model/versions/v1.2.3/infer"]) {
      const reply = await post(`${url}${path}`, SUM_REQUEST, { "x-foo": "bar" });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.outputs.length, 1);
      assert.deepEqual(reply.json.outputs[0], { name: "total", shape: [1, 1], datatype: "INT64", parameters: { content_type: "np" }, data: [6] });
      assert.equal(reply.json.model_name, "sum-model");
      assert.equal(reply.json.model_version, "v1.2.3");
      // Its headers moved to the answer's, the parameters stay, empty.
      assert.deepEqual(reply.json.parameters, {});
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
      // MLServer's events keep the response's headers in their parameters.
      assert.equal(events(reply)[0].parameters.headers["Ce-Specversion"], "0.3");
    }
    // A model that does not stream answers a stream with predict() once.
    assert.deepEqual(events(await post(`${url}/v2/models/sum-model/infer_stream`, SUM_REQUEST)).map((e) => e.outputs[0].data), [[6]]);
  });

  test("errors as MLServer answers them: its message alone, the runtime's status, FastAPI's 422 for a body its types refuse", async () => {
    for (const action of ["infer", "generate"]) {
      const unknown = await post(`${url}/v2/models/my-model/versions/v0/${action}`, SUM_REQUEST);
      assert.equal(unknown.status, 404);
      assert.equal(unknown.json.error, "Model my-model with version v0 not found");
    }
    assert.equal((await post(`${url}/v2/models/sum-model/versions/v0/infer`, SUM_REQUEST)).json.error, "Model sum-model with version v0 not found");
    assert.equal((await send(`${url}/v2/models/my-model`)).json.error, "Model my-model not found");
    // A runtime's error is worded as MLServer's inference pool words it, with its status.
    const failed = await post(`${url}/v2/models/error-model/infer`, SUM_REQUEST);
    assert.equal(failed.status, 400);
    assert.deepEqual(failed.json, { error: `${MLSERVER_ERROR}: something really bad happened` });
    const unprocessable = await post(`${url}/v2/models/unprocessable-model/infer`, SUM_REQUEST);
    assert.equal(unprocessable.status, 422);
    assert.deepEqual(unprocessable.json, { error: `${MLSERVER_ERROR}: something really bad happened` });
    const badType = await post(`${url}/v2/models/sum-model/infer`, { inputs: [{ ...SUM_REQUEST.inputs[0], datatype: "INT322" }] });
    assert.equal(badType.status, 422);
    assert.equal(badType.json.error, undefined);
    assert.equal(badType.json.detail[0].msg, DATATYPE_ERROR);
    assert.deepEqual(badType.json.detail[0].loc, ["body", "inputs", 0, "datatype"]);
    const load = await post(`${url}/v2/repository/models/my-model/load`, {});
    assert.equal(load.status, 404);
    assert.equal(load.json.error, "Model my-model not found");
  });

  test("server and model metadata as MLServer gives them: its name, the mlserver version, no extensions; the settings' versions", async () => {
    const version = execFileSync("env" in python ? python.env.SHOAL_PYTHON! : "python3", ["-c", "import importlib.metadata as m; print(m.version('mlserver'))"]).toString().trim();
    assert.deepEqual((await send(`${url}/v2`)).json, { name: "mlserver", version, extensions: [] });
    const metadata = (await send(`${url}/v2/models/sum-model`)).json;
    assert.deepEqual(metadata.versions, ["sum-model/v1.2.3"]);
    assert.deepEqual(metadata.inputs, [{ name: "input-0", datatype: "FP32", shape: [128], parameters: { content_type: "np" } }]);
    const served = await grpc.call("ServerMetadata", {});
    assert.deepEqual([served.name, served.version, served.extensions], ["mlserver", version, []]);
    assert.deepEqual((await grpc.call("ModelMetadata", { name: "sum-model", version: "v1.2.3" })).versions, ["sum-model/v1.2.3"]);
  });

  test("custom handlers: each at its rest_path while its model is loaded, called with the JSON body (gzip too), its answer JSON", async () => {
    const summed = await post(`${url}/my-custom-endpoint`, [1, 2, 3, 4]);
    assert.equal(summed.status, 200, summed.text);
    assert.equal(summed.json, 10);
    const gzipped = await post(`${url}/my-custom-endpoint`, gzipSync(JSON.stringify([1, 2, 3, 4])), { "content-encoding": "gzip", "content-type": "application/json" });
    assert.equal(gzipped.json, 10);
    // Shoal compresses answers from 1 KiB (MLServer from 500 bytes): MLServer's test asks 1000 letters.
    const long = await post(`${url}/custom-endpoint-with-long-response`, 2000, { "accept-encoding": "gzip" });
    assert.equal(long.status, 200, long.text);
    assert.equal(long.headers.get("content-encoding"), "gzip");
    assert.match(long.json.foo, /^[a-z]{2000}$/);
    assert.equal((await send(`${url}/my-custom-endpoint`)).status, 405);
    // Unloaded, its models' handlers go with them (strict-sum-model runs the same SumModel).
    const models = ["sum-model", "strict-sum-model"];
    try {
      for (const model of models) assert.equal((await post(`${url}/v2/repository/models/${model}/unload`, {})).status, 200);
      assert.equal((await post(`${url}/my-custom-endpoint`, [1])).status, 404);
    } finally {
      for (const model of models) assert.equal((await post(`${url}/v2/repository/models/${model}/load`, {})).status, 200);
    }
    assert.equal((await post(`${url}/my-custom-endpoint`, [1, 2])).json, 3);
  });

  test("declared inputs are documentation, unless the settings' strict_inputs turns Shoal's checks on", async () => {
    // sum-model declares FP32 [128], and takes INT32 [1, 3] all the same, as MLServer does.
    assert.equal((await post(`${url}/v2/models/sum-model/infer`, SUM_REQUEST)).status, 200);
    assert.deepEqual((await post(`${url}/v2/models/strict-sum-model/infer`, SUM_REQUEST)).json.outputs[0].data, [6]);
    const refused = [
      [{ ...SUM_REQUEST.inputs[0], datatype: "FP32" }, "input 'input-0' is FP32, and the model takes INT32"],
      [{ ...SUM_REQUEST.inputs[0], shape: [3, 1] }, "input 'input-0' has shape [3, 1], and the model takes [-1, 3]"],
      [{ ...SUM_REQUEST.inputs[0], name: "x" }, "unknown input 'x': the model takes input-0"],
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
      ["unprocessable-model", undefined, "READY"],
    ]);
    assert.equal(index.find((e) => e.name === "load-error-model")!.reason, `${MLSERVER_ERROR}: something really bad happened`);
    const load = await post(`${url}/v2/repository/models/load-error-model/load`, {});
    assert.equal(load.status, 400);
    assert.deepEqual(load.json, { error: `${MLSERVER_ERROR}: something really bad happened` });
    assert.equal((await post(`${url}/v2/repository/models/my-model/load`, {})).status, 404);
    assert.equal((await post(`${url}/v2/repository/models/text-model/unload`, {})).status, 200);
    assert.equal((await send(`${url}/v2/models/text-model`)).status, 404);
    assert.equal((await post(`${url}/v2/repository/models/text-model/load`, {})).status, 200);
    assert.equal((await send(`${url}/v2/models/text-model`)).status, 200);
  });

  test("gRPC: readiness, ModelInfer's typed contents (raw for a raw request), headers as trailing metadata, the repository", async () => {
    assert.equal((await grpc.call("ServerLive", {})).live, true);
    assert.equal((await grpc.call("ServerReady", {})).ready, true);
    assert.equal((await grpc.call("ModelReady", { name: "sum-model", version: "v1.2.3" })).ready, true);
    const metadata = await grpc.call("ModelMetadata", { name: "sum-model", version: "v1.2.3" });
    assert.equal(metadata.name, "sum-model");
    assert.equal(metadata.platform, "mlserver");
    for (const model_version of ["v1.2.3", ""]) {
      const typed = await grpc.call("ModelInfer", { ...GRPC_SUM, model_version });
      assert.equal(typed.outputs.length, 1);
      assert.deepEqual(typed.outputs[0].contents.int64_contents, ["6"]);
      assert.equal(typed.raw_output_contents.length, 0);
    }
    const raw = Buffer.alloc(12);
    [1, 2, 3].forEach((v, i) => raw.writeInt32LE(v, 4 * i));
    const { contents: _typed, ...rawInput } = GRPC_SUM.inputs[0]!;
    const answer = await grpc.call("ModelInfer", { ...GRPC_SUM, inputs: [rawInput], raw_input_contents: [raw] });
    assert.equal(answer.outputs[0].datatype, "INT64");
    assert.equal((answer.raw_output_contents[0] as Buffer).readBigInt64LE(0), 6n);
    // The response's headers (the echoed x-foo, CloudEvents') come as trailing metadata.
    const trailers = await new Promise<grpcJs.Metadata>((resolve, reject) => {
      const metadata = new grpcJs.Metadata();
      metadata.set("x-foo", "bar");
      const call = grpc.client.ModelInfer({ ...GRPC_SUM, model_version: "" }, metadata, (err: Error | null) => err !== null && reject(err));
      call.on("status", (status: grpcJs.StatusObject) => resolve(status.metadata));
    });
    assert.deepEqual(trailers.get("x-foo"), ["bar"]);
    assert.deepEqual(trailers.get("ce-specversion"), ["0.3"]);
    assert.equal((await grpc.call("RepositoryIndex", {})).models.length, 7);
    await grpc.call("RepositoryModelUnload", { model_name: "sum-model" });
    assert.equal((await grpc.error("ModelMetadata", { name: "sum-model" })).code, grpcJs.status.NOT_FOUND);
    await grpc.call("RepositoryModelLoad", { model_name: "sum-model" });
    assert.equal((await grpc.call("ModelMetadata", { name: "sum-model" })).name, "sum-model");
  });

  test("gRPC errors as MLServer's: its codes (a 422 is FAILED_PRECONDITION) and its message alone", async () => {
    const cases: [object, number, string | RegExp][] = [
      [{ ...GRPC_SUM, model_name: "my-model" }, grpcJs.status.NOT_FOUND, "Model my-model with version v1.2.3 not found"],
      [{ ...GRPC_SUM, model_name: "error-model", model_version: "" }, grpcJs.status.INVALID_ARGUMENT, `${MLSERVER_ERROR}: something really bad happened`],
      [{ ...GRPC_SUM, model_name: "unprocessable-model", model_version: "" }, grpcJs.status.FAILED_PRECONDITION, `${MLSERVER_ERROR}: something really bad happened`],
      // MLServer's converters build each input as a RequestInput, and the error is pydantic's text.
      [{ ...GRPC_SUM, inputs: [{ ...GRPC_SUM.inputs[0], datatype: "INT322" }] }, grpcJs.status.INTERNAL, new RegExp(`^1 validation error for RequestInput\ndatatype\n  ${DATATYPE_ERROR.replace(/[()]/g, "\\$&")} \\[type=enum, input_value='INT322', input_type=str\\]`)],
    ];
    for (const [request, code, details] of cases) {
      const error = await grpc.error("ModelInfer", request);
      assert.equal(error.code, code, error.details);
      if (typeof details === "string") assert.equal(error.details, details);
      else assert.match(error.details, details);
    }
    const load = await grpc.error("RepositoryModelLoad", { model_name: "my-model" });
    assert.deepEqual([load.code, load.details], [grpcJs.status.NOT_FOUND, "Model my-model not found"]);
  });

  test("gRPC ModelStreamInfer: a streaming model's responses one by one, each a ModelInferResponse, as MLServer's", async () => {
    const prompt = { model_name: "text-stream-model", inputs: [{ name: "prompt", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("What is the capital of France?")] } }] };
    for (const model_version of ["v1.2.3", ""]) {
      const { responses, error, trailers } = await mlserverStream(port, { ...prompt, model_version });
      assert.equal(error, undefined, error?.details);
      assert.deepEqual(responses.map((r) => Buffer.from(r.outputs[0].contents.bytes_contents[0]).toString()), WORDS);
      // As MLServer's: no id given, none made; the last response's headers as trailing metadata.
      assert.deepEqual(new Set(responses.map((r) => r.id)), new Set([""]));
      assert.deepEqual(trailers.get("ce-specversion"), ["0.3"]);
      assert.deepEqual(trailers.get("ce-modelid"), ["text-stream-model"]);
    }
    const unknown = await mlserverStream(port, { ...prompt, model_name: "my-model", model_version: "v1.2.3" });
    assert.deepEqual([unknown.error?.code, unknown.error?.details], [grpcJs.status.NOT_FOUND, "Model my-model with version v1.2.3 not found"]);
    // ModelInfer takes one answer: the stream's responses joined.
    const joined = await grpc.call("ModelInfer", prompt);
    assert.deepEqual(joined.outputs[0].shape.map(Number), [6, 1]);
  });
});
