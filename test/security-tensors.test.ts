/**
 * What a request may make the server allocate: bodies that would decode into far more than they
 * hold (MessagePack references, shapes the data does not fill, millions of empty BYTES elements)
 * are refused before anything of their claimed size is made, module models get only the inputs
 * they declare, and JSON numbers too large for their type are refused rather than read as
 * infinities. Each against a real server, with its memory watched from /proc.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, test, type TestContext } from "node:test";
import { Packr } from "msgpackr";
import { msgpack } from "../src/codecs.js";
import { assertError, fixture, post, send, startServer, type Reply, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { ModelDir, serveModel } from "./onnx-helpers.js";

const INPUTS = 16;
const MB = 1024 * 1024;

/** Resident memory of a process and of every process under it, in bytes (threads share theirs). */
function treeRss(pid: number): number {
  let total = 0;
  try {
    total = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      for (const child of children.split(/\s+/).filter((c) => c.length > 0)) total += treeRss(Number(child));
    }
  } catch {
    // The process ended while it was being read.
  }
  return total;
}

/**
 * Runs `request`, sampling the server's memory every few ms: its answer and the most it grew,
 * which the test's output shows.
 */
async function watched(t: TestContext, server: ServerProcess, request: () => Promise<Reply>): Promise<{ reply: Reply; grewMb: number }> {
  const pid = server.proc.pid!;
  const base = treeRss(pid);
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, treeRss(pid))), 5);
  try {
    const reply = await request();
    peak = Math.max(peak, treeRss(pid));
    const grewMb = (peak - base) / MB;
    t.diagnostic(`answered ${reply.status} in ${reply.elapsedMs.toFixed(0)} ms; the server grew by ${grewMb.toFixed(1)} MB at most`);
    return { reply, grewMb };
  } finally {
    clearInterval(timer);
  }
}

/**
 * A MessagePack body of about 12 KB that msgpackr's structured-clone extension reads as nested
 * arrays of `outer` x 1000 x 1000 numbers: each level lists one reference a thousand times.
 */
function referenceBomb(outer: number): Uint8Array {
  const row = new Array<number>(1000).fill(0.5);
  const plane = new Array<number[]>(1000).fill(row);
  const body = new Packr({ structuredClone: true, useRecords: false }).pack({ input: new Array<number[][]>(outer).fill(plane) });
  assert.ok(body.byteLength < 20_000, `the body is ${body.byteLength} bytes`);
  return new Uint8Array(body);
}

const MSGPACK = { "content-type": "application/msgpack" };

function metric(text: string, line: string): number {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  assert.ok(found !== undefined, `no ${line} in /metrics`);
  return Number(found.slice(line.length + 1));
}

describe("plain MessagePack", () => {
  const decode = (bytes: Uint8Array | number[]) => msgpack.decode(Uint8Array.from(bytes));
  const refused = (type: number) => ({ name: "DecodingError", message: new RegExp(`^MessagePack extension type ${type} at byte \\d+ is not accepted`) });

  test("every kind of token but extensions is read, at every size", () => {
    const long = "x".repeat(70_000);
    const value = {
      ints: [0, 127, -1, -32, 200, 60_000, 4_000_000_000, 2n ** 64n - 1n, -100, -30_000, -2_000_000_000, -(2n ** 60n)],
      floats: [0.5, 1e300],
      strings: ["", "a".repeat(31), "b".repeat(200), "c".repeat(60_000), long],
      bins: [new Uint8Array(10), new Uint8Array(300), new Uint8Array(70_000)],
      lists: [new Array(20).fill(null), new Array(70_000).fill(true)],
      maps: [Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, false])), Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, i]))],
      dates: [new Date(0), new Date(1.5), new Date(2 ** 40 * 1000)],
    };
    const packed = new Packr({ useRecords: false, variableMapSize: true }).pack(value);
    // With a float 32 (0.5) after it, in a list of two.
    assert.deepEqual(decode([0x92, ...packed, 0xca, 0x3f, 0x00, 0x00, 0x00]), [value, 0.5]);
  });

  test("bytes that look like extensions inside strings and bin are data", () => {
    const inside = Uint8Array.of(0xd4, 0x70, 0x00, 0xc7, 0x01, 0x69, 0xc1);
    assert.deepEqual(decode(new Packr({ useRecords: false }).pack({ s: Buffer.from(inside).toString("latin1"), b: inside })), { s: Buffer.from(inside).toString("latin1"), b: inside });
  });

  test("each extension type is refused, whatever its size, and so is 0xc1", () => {
    // fixext 1..16, ext 8/16/32: a pointer (0x70), an id (0x69), a record (0x72), bundled strings (0x62), type 0.
    assert.throws(() => decode([0xd4, 0x70, 0x00]), refused(112));
    assert.throws(() => decode([0xd6, 0x69, 0, 0, 0, 1, 0xc0]), refused(105));
    assert.throws(() => decode([0xd5, 0x72, 0x40, 0x00, 0x91, 0xa1, 0x61, 0x01]), refused(114));
    assert.throws(() => decode([0xd7, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]), refused(0));
    assert.throws(() => decode([0xd8, 0x01, ...new Array(16).fill(0)]), refused(1));
    assert.throws(() => decode([0xc7, 0x04, 0x62, 0, 0, 0, 0]), refused(98));
    assert.throws(() => decode([0xc8, 0x00, 0x01, 0x7f, 0]), refused(127));
    assert.throws(() => decode([0xc9, 0x00, 0x00, 0x00, 0x01, 0x80, 0]), refused(-128));
    // Deep inside a map of a list, after a string that holds 0xd4.
    assert.throws(() => decode([0x91, 0x82, 0xa1, 0x61, 0xa1, 0xd4, 0xa1, 0x62, 0xd4, 0x73, 0x00]), refused(115));
    assert.throws(() => decode([0x92, 0x01, 0xc1]), { name: "DecodingError", message: "the byte 0xc1 at 2 is not MessagePack" });
    // Cut short: the decoder says so.
    assert.throws(() => decode([0xc7, 0x04]));
    assert.throws(() => decode([0xd9, 0x05, 0x61]));
  });
});

describe("MessagePack from clients has no extensions", () => {
  const models = new ModelDir();
  let onnx: ServerProcess;
  let echo: ServerProcess;

  before(async () => {
    onnx = await serveModel(models.mlp("mlp", { inputs: INPUTS, hidden: 8, layers: 1, outputs: 2 }));
    echo = await startServer(fixture("msgpack-echo.ts"));
  });
  after(async () => {
    await Promise.all([onnx?.stop(), echo?.stop()]);
    models.remove();
  });

  test("the ONNX route refuses a reference body at once, without growing", async (t) => {
    const { reply, grewMb } = await watched(t, onnx, () => send(`${onnx.url}/inference`, { method: "POST", body: referenceBomb(250), headers: MSGPACK }));
    assertError(reply, 400, /^decoding error: MessagePack extension type 105 at byte \d+ is not accepted/);
    assert.ok(reply.elapsedMs < 1000, `answered in ${reply.elapsedMs} ms`);
    assert.ok(grewMb < 100, `the server grew by ${grewMb.toFixed(0)} MB`);
  });

  test("a stage with the msgpack codec refuses it too, in a thread or in a process", async (t) => {
    for (const route of ["/echo", "/echo-process"]) {
      const { reply, grewMb } = await watched(t, echo, () => send(`${echo.url}${route}`, { method: "POST", body: referenceBomb(100), headers: MSGPACK }));
      assertError(reply, 400, /^decoding error: MessagePack extension type 105 at byte \d+ is not accepted/);
      assert.ok(reply.elapsedMs < 1000, `${route}: answered in ${reply.elapsedMs} ms`);
      assert.ok(grewMb < 100, `${route}: the server grew by ${grewMb.toFixed(0)} MB`);
    }
  });

  test("records, sets and typed arrays are refused; plain MessagePack with bin and timestamps is read", async () => {
    const records = new Packr({ useRecords: true }).pack([{ a: 1 }, { a: 2 }]);
    assertError(await send(`${echo.url}/echo`, { method: "POST", body: records, headers: MSGPACK }), 400, /extension type 114 /);
    const set = new Packr({ moreTypes: true }).pack(new Set([1]));
    assertError(await send(`${echo.url}/echo`, { method: "POST", body: set, headers: MSGPACK }), 400, /extension type 115 /);
    const typed = new Packr({ moreTypes: true }).pack(new Float64Array([1]));
    assertError(await send(`${echo.url}/echo`, { method: "POST", body: typed, headers: MSGPACK }), 400, /extension type 116 /);
    const plain = new Packr({ useRecords: false }).pack({ text: "é", n: [1, -1, 2 ** 40, 0.5], bin: Buffer.from([1, 2]), at: new Date(0) });
    const reply = await send(`${echo.url}/echo`, { method: "POST", body: plain, headers: MSGPACK });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(new Packr({ useRecords: false }).unpack(reply.body), { text: "é", n: [1, -1, 2 ** 40, 0.5], bin: Uint8Array.of(1, 2), at: new Date(0) });
  });

  test("the ONNX route still reads MessagePack with bin data", async () => {
    const body = new Packr({ useRecords: false }).pack({ input: { data: Buffer.from(new Float32Array(INPUTS).buffer), shape: [1, INPUTS] } });
    const reply = await send(`${onnx.url}/inference`, { method: "POST", body, headers: MSGPACK });
    assert.equal(reply.status, 200, reply.text);
  });

  test("shapes that claim a billion elements are refused before anything is made", async (t) => {
    const flat = await post(`${onnx.url}/inference`, { input: { data: [0], shape: [62_500_000, INPUTS] } });
    assertError(flat, 422, /^request validation error: input 'input': the request would hold 1000000000 tensor elements, more than the server's limit of 10485760 \(--max-tensor-elements\)$/);
    const packed = new Packr({ useRecords: false }).pack({ input: { data: Buffer.alloc(4), shape: [62_500_000, INPUTS] } });
    assertError(await send(`${onnx.url}/inference`, { method: "POST", body: packed, headers: MSGPACK }), 422, /input 'input': the request would hold 1000000000 tensor elements/);
    // Nested lists whose first rows claim 1000 x 1000 x 1000: the rank is refused first.
    const claimed = `{"input":[[[${new Array(1000).fill(0).join(",")}]${",[0]".repeat(999)}]${",[[0]]".repeat(999)}]}`;
    const { reply, grewMb } = await watched(t, onnx, () => post(`${onnx.url}/inference`, claimed));
    assertError(reply, 422, "request validation error: input 'input' expects float32 [N, 16]; got shape [1000, 1000, 1000]");
    assert.ok(grewMb < 100, `the server grew by ${grewMb.toFixed(0)} MB`);
    // Rows of the right rank that the first row does not speak for.
    const ragged = `{"input":[[${new Array(INPUTS).fill(0).join(",")}]${",[0]".repeat(10_000)}]}`;
    assertError(await post(`${onnx.url}/inference`, ragged), 422, "request validation error: input 'input' is not rectangular: [1] has 1 values where 16 were expected; expected float32 [N, 16]");
  });

  test("a JSON number too large for float32 is refused, not read as Infinity", async () => {
    const row = (v: string) => `{"input":[[${v}${",0".repeat(INPUTS - 1)}]]}`;
    for (const v of ["1e400", "-1e400", "1e39"]) {
      assertError(await post(`${onnx.url}/inference`, row(v)), 422, new RegExp(`^request validation error: input 'input' expects finite float32 values within its range .*; element \\[0, 0\\] is -?(Infinity|1e\\+39)$`));
    }
    assert.equal((await post(`${onnx.url}/inference`, row("3.4e38"))).status, 200);
  });
});

describe("V2 requests stay within the limits and the declared inputs", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;

  before(async () => {
    repo.module("upper", "upper.ts", { inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }] });
    repo.module("scale", "scale.ts", { inputs: [{ name: "x", datatype: "FP32", shape: [-1, 2] }] });
    server = await serveRepository(repo.dir);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  const restarts = async () => metric((await send(`${server.url}/metrics`)).text, 'shoal_stage_worker_restarts_total{stage="models"}');

  test("10 MB of BYTES elements are refused at once, and the worker stays", async (t) => {
    const before = await restarts();
    const url = `${server.url}/v2/models/upper/infer`;
    const empty = 2_500_000;
    const binary = (shape: number) => {
      const header = Buffer.from(JSON.stringify({ inputs: [{ name: "text", datatype: "BYTES", shape: [shape], parameters: { binary_data_size: 4 * empty } }] }));
      const body = Buffer.concat([header, Buffer.alloc(4 * empty)]);
      return () => send(url, { method: "POST", body, headers: { "content-type": "application/octet-stream", "inference-header-content-length": String(header.byteLength) } });
    };
    const json = () => post(url, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[${3_000_000}],"data":[${new Array(3_000_000).fill('""').join(",")}]}]}`);
    for (const [request, error] of [
      [binary(empty), "bad request: input 'text': the request would hold 2500000 BYTES elements, more than the server's limit of 65536 (--max-bytes-elements)"],
      [binary(4), "bad request: input 'text': binary data holds more than the 4 BYTES elements of shape [4]: 9999984 bytes are left after them"],
      [json, "bad request: input 'text': the request would hold 3000000 BYTES elements, more than the server's limit of 65536 (--max-bytes-elements)"],
    ] as const) {
      const { reply, grewMb } = await watched(t, server, request);
      assertError(reply, 400, error);
      assert.ok(reply.elapsedMs < 2000, `answered in ${reply.elapsedMs} ms`);
      assert.ok(grewMb < 150, `the server grew by ${grewMb.toFixed(0)} MB`);
    }
    assert.equal(await restarts(), before);
    const ok = await post(url, { inputs: [{ name: "text", datatype: "BYTES", shape: [1], data: ["a"] }] });
    assert.equal(ok.status, 200, ok.text);
  });

  test("shapes that claim a billion elements are refused", async () => {
    const url = `${server.url}/v2/models/scale/infer`;
    assertError(await post(url, { inputs: [{ name: "x", datatype: "FP32", shape: [500_000_000, 2], data: [0, 0] }] }), 400, /^bad request: input 'x': the request would hold 1000000000 tensor elements, more than the server's limit of 10485760/);
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [500_000_000, 2], parameters: { binary_data_size: 8 } }] }));
    const reply = await send(url, { method: "POST", body: Buffer.concat([header, Buffer.alloc(8)]), headers: { "inference-header-content-length": String(header.byteLength) } });
    assertError(reply, 400, /^bad request: input 'x': the request would hold 1000000000 tensor elements/);
  });

  test("a module model declaring FP32 refuses FP16, other ranks and sizes, unknown and missing inputs", async () => {
    const url = `${server.url}/v2/models/scale/infer`;
    const x = (fields: Record<string, unknown>) => ({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2], ...fields }] });
    assertError(await post(url, x({ datatype: "FP16" })), 400, "bad request: input 'x' is FP16; the model takes FP32");
    assertError(await post(url, x({ shape: [2] })), 400, "bad request: input 'x' has shape [2]; the model takes FP32 [-1, 2]");
    assertError(await post(url, x({ shape: [2, 1] })), 400, "bad request: input 'x' has shape [2, 1]; the model takes FP32 [-1, 2]");
    assertError(await post(url, x({ name: "y" })), 400, "bad request: the model has no input 'y'; its inputs: x (FP32 [-1, 2])");
    assertError(await post(url, { inputs: [] }), 400, "bad request: missing input 'x' (FP32 [-1, 2])");
    const ok = await post(url, x({ shape: [2, 2], data: [1, 2, 3, 4] }));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json.outputs[0].data, [1, 2, 3, 4]);
  });

  test("1e400 is refused; the strings for infinities are read", async () => {
    const url = `${server.url}/v2/models/scale/infer`;
    const body = (a: string, b: string) => `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[${a},${b}]}]}`;
    assertError(await post(url, body("1", "1e400")), 400, `bad request: input 'x': data[1] is a number beyond the range of doubles (it reads as Infinity); send an infinity as the string "Infinity" or "-Infinity"`);
    assertError(await post(url, body("-1e39", "1")), 400, `bad request: input 'x': data[0] is -1e+39, beyond the range of FP32; send an infinity as the string "Infinity" or "-Infinity"`);
    const ok = await post(url, body('"Infinity"', '"-Infinity"'));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json.outputs[0].data, ["Infinity", "-Infinity"]);
  });
});
