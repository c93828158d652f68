/**
 * The JSON reader for float tensors: the numbers JSON.parse would give, the shapes of rectangular
 * nested arrays, and giving up (for JSON.parse to read, or refuse) on everything else.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { readFloatTensors, type FloatInputs } from "../src/tensor/json-floats.js";

const utf8 = new TextEncoder();
const F64: FloatInputs = new Map([["x", "float64"]]);
const read = (text: string, inputs: FloatInputs = F64) => readFloatTensors(utf8.encode(text), inputs);

// Numbers as people and programs write them: every layout JSON allows.
function numberTexts(): string[] {
  const out = ["0", "-0", "0.0", "-0.0", "1", "-1", "10", "100", "0.1", "0.5", "1.10", "1e0", "1E5", "1e+5", "1e-5", "2.5E-3", "0.000123", "123456789012345", "1234567890123456", "12345678901234567890", "9007199254740993"];
  out.push("0.30000000000000004", "1.7976931348623157e308", "5e-324", "1e-400", "0.0000000000000000000001", "1e22", "1e23", "123e-20", "4.35", "8.589973e9", "0.1e1");
  for (let i = 0; i < 20_000; i++) {
    const v = (Math.random() - 0.5) * 10 ** Math.floor(Math.random() * 40 - 20);
    const f = Math.fround(v);
    switch (i % 6) {
      case 0:
        out.push(String(v));
        break;
      case 1:
        out.push(String(f));
        break;
      case 2:
        out.push(v.toExponential(Math.floor(Math.random() * 17)));
        break;
      case 3:
        out.push(Math.abs(v) < 1e15 ? v.toFixed(Math.floor(Math.random() * 20)) : String(v));
        break;
      case 4:
        out.push(f.toPrecision(1 + Math.floor(Math.random() * 9)).replace("e", "E"));
        break;
      default:
        out.push(String(Math.round(v)));
    }
  }
  return out;
}

describe("readFloatTensors", () => {
  test("gives every number exactly as JSON.parse does", () => {
    const texts = numberTexts();
    const got = read(`{"x": [${texts.join(",")}]}`)!;
    assert.ok(got !== undefined);
    const want = JSON.parse(`[${texts.join(",")}]`) as number[];
    assert.deepEqual(got.x!.shape, [texts.length]);
    want.forEach((v, i) => assert.ok(Object.is(got.x!.data[i], v), `${texts[i]}: got ${got.x!.data[i]}, JSON.parse gives ${v}`));
  });

  test("float32 inputs hold what a Float32Array of JSON.parse's numbers holds", () => {
    // Numbers beyond float32's range are left to JSON.parse, below.
    const texts = numberTexts().filter((t) => Math.abs(Number(t)) < 3.4e38).slice(0, 5000);
    const got = read(`{"x": [${texts.join(",")}]}`, new Map([["x", "float32"]]))!;
    assert.ok(got.x!.data instanceof Float32Array);
    assert.deepEqual(got.x!.data, Float32Array.from(JSON.parse(`[${texts.join(",")}]`) as number[]));
  });

  test("rectangular nested arrays give their shape, fields their own tensors, whitespace anywhere", () => {
    const got = read(' \n{ "x" : [ [1, 2 ,3] ,\t[4,5,6] ] , "y":[[[0.5],[1.5]]] }\r\n', new Map([["x", "float64"], ["y", "float32"]]))!;
    assert.deepEqual(got.x!.shape, [2, 3]);
    assert.deepEqual([...got.x!.data], [1, 2, 3, 4, 5, 6]);
    assert.ok(got.x!.data instanceof Float64Array);
    assert.deepEqual(got.y!.shape, [1, 2, 1]);
    assert.deepEqual([...got.y!.data], [0.5, 1.5]);
    // Each tensor has a buffer of its own, whatever the reader reuses.
    assert.notEqual(got.x!.data.buffer, got.y!.data.buffer);
    // Past the reader's first buffer, and past what it keeps between requests.
    for (const n of [10_000, 300_000]) {
      const big = read(`{"x": [${Array.from({ length: n }, (_, i) => i).join(",")}]}`)!;
      assert.equal(big.x!.data.length, n);
      assert.equal(big.x!.data[n - 1], n - 1);
    }
    assert.deepEqual([...read('{"x": [[7, 8]]}')!.x!.data], [7, 8]);
  });

  test("gives up on everything but float tensors as nested arrays, for JSON.parse to read or refuse", () => {
    const cases = [
      "[1, 2]",
      "1",
      "{}",
      '{"x": 1}',
      '{"x": []}',
      '{"x": [[]]}',
      '{"x": [[1, 2], [3]]}',
      '{"x": [[1, 2], 3]}',
      '{"x": [1, [2]]}',
      '{"x": [[1], [[2]]]}',
      '{"x": ["1"]}',
      '{"x": [true]}',
      '{"x": [null]}',
      '{"x": [{"a": 1}]}',
      '{"x": {"data": [1], "shape": [1]}}',
      '{"y": [1]}',
      '{"x": [1], "y": [2]}',
      '{"x": [1], "x": [2]}',
      '{"\\u0078": [1]}',
      '{"é": [1]}',
      '{"x": [1]} 2',
      '{"x": [1],}',
      '{"x": [1,]}',
      '{"x": [1 2]}',
      '{"x": [1]',
      '{"x" [1]}',
      '{x: [1]}',
      ...["01", "1.", ".5", "+1", "1e", "1e+", "-", "--1", "0x10", "NaN", "Infinity", "1_000"].map((n) => `{"x": [${n}]}`),
    ];
    for (const text of cases) assert.equal(read(text), undefined, text);
  });

  test("numbers beyond the range of the input's type are left to JSON.parse, which reads them as infinities", () => {
    const F32: FloatInputs = new Map([["x", "float32"]]);
    for (const n of ["1e400", "-1e400", "1e309", "123456789e301"]) assert.equal(read(`{"x": [1, ${n}]}`), undefined, n);
    for (const n of ["1e39", "-3.5e38", "340282356779733661637539395458142568448"]) assert.equal(read(`{"x": [1, ${n}]}`, F32), undefined, n);
    // The largest magnitudes that round to a finite float32 are read.
    for (const n of ["3.4028235e38", "-3.4028235677973362e38"]) assert.equal(read(`{"x": [${n}]}`, F32)!.x!.data[0], Math.fround(Number(n)), n);
    assert.equal(read('{"x": [1e39]}')!.x!.data[0], 1e39);
  });

  test("more numbers than the limit, all fields together, are refused as soon as they are read", () => {
    const three = utf8.encode('{"x": [[1, 2], [3, 4]], "y": [5]}');
    const both: FloatInputs = new Map([["x", "float64"], ["y", "float32"]]);
    assert.deepEqual(readFloatTensors(three, both, 5)!.y!.data, Float32Array.of(5));
    assert.throws(() => readFloatTensors(three, both, 4), { name: "ValidationError", message: "the request holds more than 4 tensor elements, the server's limit (--max-tensor-elements)" });
    assert.throws(() => readFloatTensors(three, both, 3), { name: "ValidationError" });
    // The reader is left as it was: a body within the limit reads as before.
    assert.deepEqual([...readFloatTensors(three, both, 100)!.x!.data], [1, 2, 3, 4]);
  });

  test("arrays nested past the limit are left to JSON.parse", () => {
    assert.equal(read(`{"x": ${"[".repeat(40)}1${"]".repeat(40)}}`), undefined);
    assert.deepEqual(read(`{"x": ${"[".repeat(8)}1${"]".repeat(8)}}`)!.x!.shape, [1, 1, 1, 1, 1, 1, 1, 1]);
  });
});
