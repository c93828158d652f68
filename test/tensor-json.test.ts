import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { toNested, type TensorValue } from "shoal/onnx";
import { ValidationError } from "../src/errors.js";
import { ElementBudget } from "../src/tensor/element-budget.js";
import type { TensorType } from "../src/tensor/datatypes.js";
import { readTensor } from "../src/tensor/read-tensor.js";
import type { TensorSpec } from "../src/tensor/tensor.js";
import { shortestFloat32, tensorsToJson } from "../src/tensor/tensor-json.js";

const text = (tensors: Record<string, TensorValue>) => Buffer.from(tensorsToJson(tensors)).toString("utf8");
const f32 = (values: number[], shape = [values.length]): TensorValue => ({ type: "float32", shape, data: Float32Array.from(values) });

/** The fewest significant digits that read back as the float32 `v`, found the slow way. */
function shortestDigits(v: number): number {
  for (let p = 1; p <= 9; p++) if (Math.fround(Number(v.toPrecision(p))) === v) return p;
  return 9;
}

function significantDigits(written: string): number {
  const mantissa = written.replace(/^-/, "").replace(/e.*$/, "").replace(".", "");
  return mantissa.replace(/^0+/, "").replace(/0+$/, "").length || 1;
}

describe("tensors as JSON", () => {
  test("every float32 reads back as itself, in its shortest digits, laid out as JavaScript writes numbers", () => {
    const bits = new Uint32Array(1);
    const value = new Float32Array(bits.buffer);
    const values: number[] = [];
    // Bit patterns spread over every exponent, subnormals included.
    for (let i = 0; i < 60_000; i++) {
      bits[0] = (Math.random() * 2 ** 32) >>> 0;
      if (Number.isFinite(value[0]!)) values.push(value[0]!);
    }
    // Values near 1, where models' outputs live.
    for (let i = 0; i < 20_000; i++) values.push(Math.fround((Math.random() - 0.5) * 8));
    const written = JSON.parse(text({ v: f32(values) })).v as number[];
    const raw = text({ v: f32(values) }).slice(6, -2).split(",");
    assert.equal(written.length, values.length);
    values.forEach((v, i) => {
      assert.equal(Math.fround(written[i]!), v, `${v} was written as ${raw[i]}`);
      assert.equal(raw[i], String(written[i]), `${raw[i]} is not laid out as JavaScript writes ${written[i]}`);
      if (v !== 0) assert.equal(significantDigits(raw[i]!), shortestDigits(Math.abs(v)), `${v} was written as ${raw[i]}`);
    });
  });

  test("float32 examples: short decimals, powers of ten at the layout's edges, zero, NaN and infinities", () => {
    const cases: [number, string][] = [
      [0.1, "0.1"],
      [-0.3, "-0.3"],
      [0.5, "0.5"],
      [1, "1"],
      [100, "100"],
      [123456789, "123456790"],
      [16777216, "16777216"],
      [0.000001, "0.000001"],
      [1.5e-7, "1.5e-7"],
      [1e-8, "1e-8"],
      [1e20, "100000000000000000000"],
      [1e21, "1e+21"],
      [3.4e38, "3.4e+38"],
      [1e-45, "1e-45"],
      [0, "0"],
      [-0, "0"],
      [NaN, "null"],
      [Infinity, "null"],
      [-Infinity, "null"],
    ];
    const got = text({ v: f32(cases.map(([v]) => v)) });
    assert.equal(got, `{"v":[${cases.map(([, t]) => t).join(",")}]}`);
  });

  test("shortestFloat32 gives the number JavaScript prints in those same shortest digits", () => {
    const bits = new Uint32Array(1);
    const value = new Float32Array(bits.buffer);
    for (let i = 0; i < 50_000; i++) {
      bits[0] = (Math.random() * 2 ** 32) >>> 0;
      const v = value[0]!;
      const x = shortestFloat32(v);
      if (!Number.isFinite(v)) {
        assert.ok(Object.is(x, v) || (Number.isNaN(x) && Number.isNaN(v)));
        continue;
      }
      assert.equal(Math.fround(x), v, `${v} became ${x}`);
      if (v !== 0) assert.equal(significantDigits(String(x)), shortestDigits(Math.abs(v)), `${v} became ${x}`);
      assert.equal(String(x), Buffer.from(tensorsToJson({ v: f32([v], []) })).toString().slice(5, -1), `${v}: the two writers disagree`);
    }
    assert.equal(shortestFloat32(Math.fround(0.1)), 0.1);
    assert.equal(shortestFloat32(Math.fround(-2.5e-9)), -2.5e-9);
  });

  test("other element types write what JSON.stringify writes of their nested arrays", () => {
    const tensors: Record<string, TensorValue> = {
      f64: { type: "float64", shape: [2, 2], data: Float64Array.from([0.1, -1e-300, Math.PI, NaN]) },
      i8: { type: "int8", shape: [3], data: Int8Array.from([-128, 0, 127]) },
      u8: { type: "uint8", shape: [2], data: Uint8Array.from([0, 255]) },
      i16: { type: "int16", shape: [2], data: Int16Array.from([-32768, 32767]) },
      u16: { type: "uint16", shape: [1], data: Uint16Array.from([65535]) },
      i32: { type: "int32", shape: [1, 3], data: Int32Array.from([-(2 ** 31), 7, 2 ** 31 - 1]) },
      u32: { type: "uint32", shape: [2], data: Uint32Array.from([0, 2 ** 32 - 1]) },
      i64: { type: "int64", shape: [2], data: BigInt64Array.from([-(2n ** 53n), 9007199254740993n]) },
      u64: { type: "uint64", shape: [1], data: BigUint64Array.from([2n ** 64n - 1n]) },
      bool: { type: "bool", shape: [2, 1], data: Uint8Array.from([1, 0]) },
    };
    const expected = JSON.stringify(Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, toNested(t)])));
    assert.equal(text(tensors), expected);
  });

  test("shapes: scalars, empty dimensions and deep nesting", () => {
    assert.equal(text({ s: f32([2.5], []) }), '{"s":2.5}');
    assert.equal(text({ e: f32([], [0]) }), '{"e":[]}');
    assert.equal(text({ e: f32([], [2, 0]) }), '{"e":[[],[]]}');
    assert.equal(text({ d: f32([1, 2, 3, 4, 5, 6, 7, 8], [2, 2, 2]) }), '{"d":[[[1,2],[3,4]],[[5,6],[7,8]]]}');
    assert.equal(text({}), "{}");
  });

  test("names are JSON strings, escaped and in UTF-8", () => {
    const got = text({ 'a"b\\c': f32([1]), "ünïcode ✓": f32([2]) });
    assert.deepEqual(JSON.parse(got), { 'a"b\\c': [1], "ünïcode ✓": [2] });
  });

  test("a large tensor grows the buffer, and each answer has bytes of its own", () => {
    const big = f32(Array.from({ length: 100_000 }, (_, i) => i / 7));
    const first = tensorsToJson({ big });
    const second = tensorsToJson({ small: f32([1]) });
    assert.equal((JSON.parse(Buffer.from(first).toString()) as { big: number[] }).big.length, 100_000);
    assert.equal(Buffer.from(second).toString(), '{"small":[1]}');
    assert.equal(first.byteLength, first.buffer.byteLength);
  });
});

describe("tensors read from requests", () => {
  const spec = (name: string, type: TensorType, shape: (number | string)[]): TensorSpec => ({ name, type, shape, batchAxis: shape.findIndex((d) => typeof d === "string") });
  const X = spec("x", "float32", ["N", 3]);
  const invalid = (message: string | RegExp) => (err: unknown) => {
    assert.ok(err instanceof ValidationError, `expected a ValidationError, got ${String(err)}`);
    if (typeof message === "string") assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  };

  test("nested lists and { data, shape } give the same tensor", () => {
    const nested = readTensor(X, [[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(nested, { type: "float32", shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) });
    assert.deepEqual(readTensor(X, { data: [1, 2, 3, 4, 5, 6], shape: [2, 3] }), nested);
  });

  test("the elements of every input of a request count against one budget, before any is made", () => {
    const budget = new ElementBudget({ maxTensorElements: 10, maxBytesElements: 0 });
    readTensor(X, [[1, 2, 3], [4, 5, 6]], budget);
    assert.throws(() => readTensor(spec("y", "float64", ["N", 3]), { data: [0, 0, 0, 0, 0, 0], shape: [2, 3] }, budget), invalid("input 'y': the request would hold 12 tensor elements, more than the server's limit of 10 (--max-tensor-elements)"));
    readTensor(spec("z", "int8", [4]), [1, 2, 3, 4], budget);
    assert.throws(() => readTensor(spec("w", "int8", []), 1, budget), invalid(/^input 'w': the request would hold 11 tensor elements/));
    // A billion claimed: refused by the budget, whatever the data.
    assert.throws(() => readTensor(X, { data: [], shape: [333_333_334, 3] }, new ElementBudget({ maxTensorElements: 1e6, maxBytesElements: 0 })), invalid(/would hold 1000000002 tensor elements/));
  });

  test("nested lists are checked against the model's shape and for being rectangular before they are copied", () => {
    assert.throws(() => readTensor(X, [[[1, 2, 3]]]), invalid("input 'x' expects float32 [N, 3]; got shape [1, 1, 3]"));
    // The first row speaks for a thousand rows of three that are not there.
    const ragged = [[1, 2, 3], ...new Array(999).fill([1])];
    assert.throws(() => readTensor(X, ragged), invalid("input 'x' is not rectangular: [1] has 1 values where 3 were expected; expected float32 [N, 3]"));
    assert.throws(() => readTensor(X, [[1, 2, 3], 4]), invalid("input 'x' is not rectangular: [1] has a single value where 3 were expected; expected float32 [N, 3]"));
    assert.throws(() => readTensor(X, [[1, 2, [3]]]), invalid("input 'x' expects float32 values (numbers); element [0, 2] is a list"));
  });

  test("integer and bool elements in lists are within the type's range; MessagePack's bigints are read too", () => {
    assert.deepEqual(readTensor(spec("b", "bool", [3]), [true, 0, 1]).data, Uint8Array.of(1, 0, 1));
    assert.deepEqual(readTensor(spec("i", "int8", [2]), [-128, 127n]).data, Int8Array.of(-128, 127));
    assert.deepEqual(readTensor(spec("l", "int64", [2]), [2n ** 63n - 1n, -3]).data, BigInt64Array.of(2n ** 63n - 1n, -3n));
    assert.throws(() => readTensor(spec("u", "uint8", [1]), [256]), invalid("input 'u' expects uint8 values (whole numbers in the range of uint8); element [0] is 256"));
    assert.throws(() => readTensor(spec("u", "uint64", [2]), [1, -1]), invalid("input 'u' expects uint64 values (whole numbers in the range of uint64); element [1] is -1"));
    assert.throws(() => readTensor(spec("i", "int16", [1]), { data: [1.5], shape: [1] }), invalid("input 'i' expects int16 values (whole numbers in the range of int16); element [0] is 1.5"));
    assert.throws(() => readTensor(spec("b", "bool", [2, 1]), [[1], [2]]), invalid("input 'b' expects bool values (true, false, 0 or 1); element [1, 0] is 2"));
    assert.throws(() => readTensor(spec("s", "int32", []), "3"), invalid('input \'s\' expects int32 values (whole numbers in the range of int32); element [] is the string "3"'));
  });

  test("float elements in lists are finite and within the type's range; binary data is taken as it is", () => {
    const beyond = /^input 'x' expects finite float32 values within its range \(NaN and infinities travel as binary data only\); element \[0, 1\] is /;
    for (const v of [Infinity, -Infinity, NaN, 1e39, -3.5e38]) {
      assert.throws(() => readTensor(X, [[0, v, 0]]), invalid(beyond), String(v));
      assert.throws(() => readTensor(X, { data: [0, v, 0], shape: [1, 3] }), invalid(/element \[1\] is /), String(v));
    }
    assert.deepEqual(readTensor(X, [[3.4e38, -3.4e38, 0]]).data, Float32Array.of(3.4e38, -3.4e38, 0));
    assert.deepEqual(readTensor(spec("x", "float64", [2]), [1e39, -1e300]).data, Float64Array.of(1e39, -1e300));
    assert.throws(() => readTensor(spec("x", "float64", [1]), [Infinity]), invalid("input 'x' expects finite float64 values within its range (NaN and infinities travel as binary data only); element [0] is Infinity"));
    const special = Float32Array.of(NaN, Infinity, 0);
    assert.equal(readTensor(X, { data: special, shape: [1, 3] }).data, special);
    assert.ok(Number.isNaN(readTensor(X, { data: new Uint8Array(special.buffer), shape: [1, 3] }).data[0]));
  });
});
