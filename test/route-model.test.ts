/**
 * A route of stages served as a V2 model: its metadata from the stages' schemas, and inference
 * over REST V2 (JSON and binary) and gRPC through both stages, beside the route's own requests.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { fixture, post, send, startServer, type ServerProcess } from "./helpers.js";
import { freePort, V2Client } from "./grpc-helpers.js";
import { infer } from "./model-helpers.js";

describe("a route served as a V2 model", () => {
  let server: ServerProcess;
  let client: V2Client;

  before(async () => {
    const port = await freePort();
    server = await startServer(fixture("route-model.ts"), { args: ["--grpc-port", String(port)] });
    client = new V2Client(port);
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  test("its metadata comes from the stages' schemas", async () => {
    const metadata = (await send(`${server.url}/v2/models/words`)).json;
    assert.deepEqual(metadata, {
      name: "words",
      versions: [],
      platform: "shoal_route",
      inputs: [
        { name: "text", datatype: "BYTES", shape: [1] },
        { name: "scale", datatype: "FP64", shape: [1] },
        { name: "weights", datatype: "FP64", shape: [-1] },
      ],
      outputs: [
        { name: "upper", datatype: "BYTES", shape: [-1] },
        { name: "count", datatype: "FP64", shape: [1] },
        { name: "scaled", datatype: "FP64", shape: [1] },
        { name: "long", datatype: "BOOL", shape: [1] },
        { name: "weights", datatype: "FP64", shape: [-1] },
      ],
    });
    assert.equal((await send(`${server.url}/v2/models/words/ready`)).status, 200);
    assert.deepEqual((await client.call("ModelMetadata", { name: "words" })).outputs.map((o: any) => o.name), ["upper", "count", "scaled", "long", "weights"]);
    assert.deepEqual(await client.call("ModelReady", { name: "words" }), { ready: true });
    assert.equal((await client.error("ModelReady", { name: "words", version: "2" })).code, grpc.status.NOT_FOUND);
  });

  test("REST V2 inference, JSON and binary, goes through both stages", async () => {
    const request = {
      id: "w1",
      inputs: [
        { name: "text", datatype: "BYTES" as const, shape: [1], data: [new TextEncoder().encode("one two three four")] },
        { name: "scale", datatype: "FP32" as const, shape: [1], data: Float32Array.of(0.5) },
        { name: "weights", datatype: "FP64" as const, shape: [2], data: Float64Array.of(1, 2.5) },
      ],
    };
    for (const binary of [false, true]) {
      const { reply, response } = await infer(`${server.url}/v2/models/words/infer`, { ...request, ...(binary ? { parameters: { binary_data_output: true } } : {}) }, binary);
      assert.equal(reply.status, 200, reply.text);
      assert.equal(response!.model_name, "words");
      assert.equal(response!.id, "w1");
      const out = Object.fromEntries(response!.outputs.map((o) => [o.name, o]));
      assert.deepEqual((out.upper!.data as Uint8Array[]).map((b) => new TextDecoder().decode(b)), ["ONE", "TWO", "THREE", "FOUR"]);
      assert.deepEqual([...(out.count!.data as Float64Array)], [4]);
      assert.deepEqual([...(out.scaled!.data as Float64Array)], [2]);
      assert.deepEqual([...(out.long!.data as Uint8Array)], [1]);
      assert.deepEqual([...(out.weights!.data as Float64Array)], [2, 5]);
    }
    // The route's own requests are answered as before.
    const plain = await post(`${server.url}/words`, { text: "a b", scale: 3 });
    assert.deepEqual(plain.json, { upper: ["A", "B"], count: 2, scaled: 6, long: false, weights: [] });
    // A request its first stage's schema refuses.
    const bad = await post(`${server.url}/v2/models/words/infer`, { inputs: [{ name: "text", datatype: "INT32", shape: [1], data: [5] }] });
    assert.equal(bad.status, 422, bad.text);
    assert.match(bad.json.error, /^request validation error/);
  });

  test("gRPC inference with requested outputs", async () => {
    const response = await client.call("ModelInfer", {
      model_name: "words",
      id: "g1",
      inputs: [
        { name: "text", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("red green")] } },
        { name: "scale", datatype: "FP64", shape: [1], contents: { fp64_contents: [2] } },
      ],
      outputs: [{ name: "scaled" }, { name: "upper" }],
    });
    assert.equal(response.id, "g1");
    assert.deepEqual(response.outputs.map((o: any) => [o.name, o.datatype, o.shape]), [["scaled", "FP64", ["1"]], ["upper", "BYTES", ["2"]]]);
    assert.equal(response.raw_output_contents[0].readDoubleLE(0), 4);
    assert.deepEqual([...response.raw_output_contents[1]], [3, 0, 0, 0, ...Buffer.from("RED"), 5, 0, 0, 0, ...Buffer.from("GREEN")]);
    const config = (await client.call("ModelConfig", { name: "words" })).config;
    assert.equal(config.runtime, "route");
    const e = await client.error("ModelInfer", { model_name: "words", inputs: [{ name: "text", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("x")] } }, { name: "scale", datatype: "FP64", shape: [1], contents: { fp64_contents: [1] } }], outputs: [{ name: "nope" }] });
    assert.match(e.details, /has no output .nope./);
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
  });
});
