/** The V2 protocol codecs: JSON and binary tensor data, requests, responses and their errors. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ClientError, EncodingError, ShoalError } from "../src/errors.js";
import {
  decodeInferenceRequest,
  decodeInferenceResponse,
  elementSize,
  encodeInferenceRequest,
  encodeInferenceResponse,
  fromOnnxType,
  halfToNumber,
  numberToHalf,
  toOnnxType,
  typedArrayFor,
  V2_DATATYPES,
  type V2Body,
  type V2Datatype,
  type V2InferenceRequest,
  type V2Tensor,
} from "../src/v2/index.js";
import { checkDeclaredInputs } from "../src/v2/declared.js";

const utf8 = new TextEncoder();
const text = new TextDecoder();

/** A JSON body. */
function json(value: unknown): Uint8Array {
  return utf8.encode(JSON.stringify(value));
}

/** A body built by hand: the JSON header text, then raw parts; with the header's length. */
function withBinary(header: string, ...parts: number[][]): { body: Uint8Array; headerLength: number } {
  const head = utf8.encode(header);
  const body = new Uint8Array(head.byteLength + parts.reduce((n, part) => n + part.length, 0));
  body.set(head);
  let at = head.byteLength;
  for (const part of parts) {
    body.set(part, at);
    at += part.length;
  }
  return { body, headerLength: head.byteLength };
}

/** The JSON header of an encoded body, parsed. */
function headerOf(encoded: V2Body): Record<string, unknown> {
  return JSON.parse(text.decode(encoded.body.subarray(0, encoded.headerLength ?? encoded.body.byteLength)));
}

/** A tensor with its data as plain bytes, so that NaN payloads and element classes compare exactly. */
function plain(tensor: V2Tensor): unknown {
  const { data } = tensor;
  return { ...tensor, data: Array.isArray(data) ? data.map((element) => [...element]) : [data.constructor.name, ...new Uint8Array(data.buffer, data.byteOffset, data.byteLength)] };
}

function assertSameTensors(actual: readonly V2Tensor[], expected: readonly V2Tensor[]): void {
  assert.deepEqual(actual.map(plain), expected.map(plain));
}

/** Asserts that `fn` throws a 400 ClientError whose message matches. */
function assertClientError(fn: () => unknown, message: RegExp | string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ClientError, `expected a ClientError, got ${String(err)}`);
    assert.equal(err.status, 400);
    if (typeof message === "string") assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

function assertEncodingError(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof EncodingError, `expected an EncodingError, got ${String(err)}`);
    assert.equal((err as ShoalError).status, 500);
    assert.match(err.message, message);
    return true;
  });
}

const bytes = (s: string): Uint8Array => utf8.encode(s);

/** One tensor of each datatype, with the values at the edges of its range. */
const SAMPLES: Record<V2Datatype, V2Tensor> = {
  BOOL: { name: "bool", datatype: "BOOL", shape: [2, 3], data: new Uint8Array([1, 0, 1, 1, 0, 0]) },
  UINT8: { name: "u8", datatype: "UINT8", shape: [2, 2], data: new Uint8Array([0, 255, 7, 128]) },
  UINT16: { name: "u16", datatype: "UINT16", shape: [3], data: new Uint16Array([0, 65535, 300]) },
  UINT32: { name: "u32", datatype: "UINT32", shape: [3, 1], data: new Uint32Array([0, 4294967295, 70000]) },
  UINT64: { name: "u64", datatype: "UINT64", shape: [4], data: new BigUint64Array([0n, 2n ** 64n - 1n, 2n ** 53n - 1n, 2n ** 53n]) },
  INT8: { name: "i8", datatype: "INT8", shape: [2, 2], data: new Int8Array([-128, 127, 0, -1]) },
  INT16: { name: "i16", datatype: "INT16", shape: [2], data: new Int16Array([-32768, 32767]) },
  INT32: { name: "i32", datatype: "INT32", shape: [1, 3], data: new Int32Array([-2147483648, 2147483647, 5]) },
  INT64: { name: "i64", datatype: "INT64", shape: [2, 2], data: new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n, -(2n ** 53n) + 1n, 42n]) },
  // 1, -2, 0.5, 65504 (the largest), 2^-24 (the smallest), Infinity, NaN, 0.1 rounded, 0.
  FP16: { name: "f16", datatype: "FP16", shape: [9], data: new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00, 0x7e00, 0x2e66, 0x0000]) },
  FP32: { name: "f32", datatype: "FP32", shape: [2, 5], data: new Float32Array([0.1, -2.5, 3.4028234663852886e38, 1e-45, NaN, Infinity, -Infinity, 0, 16777217, 1 / 3]) },
  FP64: { name: "f64", datatype: "FP64", shape: [6], data: new Float64Array([0.1, -1e308, 5e-324, NaN, -Infinity, Math.PI]) },
  BYTES: { name: "bytes", datatype: "BYTES", shape: [2, 2], data: ["", "héllo", "日本語", "🐟 shoal"].map(bytes) },
};

/** How each sample's data reads in JSON. */
const SAMPLES_AS_JSON: Record<V2Datatype, unknown[]> = {
  BOOL: [true, false, true, true, false, false],
  UINT8: [0, 255, 7, 128],
  UINT16: [0, 65535, 300],
  UINT32: [0, 4294967295, 70000],
  UINT64: [0, "18446744073709551615", 9007199254740991, "9007199254740992"],
  INT8: [-128, 127, 0, -1],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647, 5],
  INT64: ["-9223372036854775808", "9223372036854775807", -9007199254740991, 42],
  // 65504 as 65500 and 2^-24 as 5.96e-8: the fewest digits that read back to the same half.
  FP16: [1, -2, 0.5, 65500, 5.96e-8, "Infinity", "NaN", 0.1, 0],
  // The smallest subnormal float32 (1.401298e-45) as 1e-45: one digit reads back to it.
  FP32: [0.1, -2.5, 3.4028235e38, 1e-45, "NaN", "Infinity", "-Infinity", 0, 16777216, 0.33333334],
  FP64: [0.1, -1e308, 5e-324, "NaN", "-Infinity", Math.PI],
  BYTES: ["", "héllo", "日本語", "🐟 shoal"],
};

describe("V2 datatypes", () => {
  test("each datatype has its typed array, element size and ONNX type", () => {
    const expected: Record<V2Datatype, [string | undefined, number | undefined, string]> = {
      BOOL: ["Uint8Array", 1, "bool"],
      UINT8: ["Uint8Array", 1, "uint8"],
      UINT16: ["Uint16Array", 2, "uint16"],
      UINT32: ["Uint32Array", 4, "uint32"],
      UINT64: ["BigUint64Array", 8, "uint64"],
      INT8: ["Int8Array", 1, "int8"],
      INT16: ["Int16Array", 2, "int16"],
      INT32: ["Int32Array", 4, "int32"],
      INT64: ["BigInt64Array", 8, "int64"],
      FP16: ["Uint16Array", 2, "float16"],
      FP32: ["Float32Array", 4, "float32"],
      FP64: ["Float64Array", 8, "float64"],
      BYTES: [undefined, undefined, "string"],
    };
    assert.deepEqual([...V2_DATATYPES].sort(), Object.keys(expected).sort());
    for (const datatype of V2_DATATYPES) {
      const [array, size, onnx] = expected[datatype];
      assert.equal(typedArrayFor(datatype)?.name, array, datatype);
      assert.equal(elementSize(datatype), size, datatype);
      assert.equal(toOnnxType(datatype), onnx, datatype);
      assert.equal(fromOnnxType(onnx), datatype, onnx);
    }
  });

  test("ONNX types without a V2 datatype map to undefined", () => {
    for (const type of ["int4", "uint4", "bfloat16", "float8e4m3fn", "FP32", ""]) assert.equal(fromOnnxType(type), undefined, type);
  });
});

describe("FP16", () => {
  test("half bits to numbers", () => {
    const cases: [number, number][] = [
      [0x0000, 0],
      [0x3c00, 1],
      [0xc000, -2],
      [0x3555, 0.333251953125],
      [0x7bff, 65504],
      [0x0400, 2 ** -14],
      [0x0001, 2 ** -24],
      [0x03ff, 1023 * 2 ** -24],
      [0x7c00, Infinity],
      [0xfc00, -Infinity],
    ];
    for (const [bits, value] of cases) assert.equal(halfToNumber(bits), value, bits.toString(16));
    assert.ok(Object.is(halfToNumber(0x8000), -0));
    assert.ok(Number.isNaN(halfToNumber(0x7e00)));
    assert.ok(Number.isNaN(halfToNumber(0x7c01)));
  });

  test("numbers to the nearest half, ties to even", () => {
    const cases: [number, number][] = [
      [1, 0x3c00],
      [-2, 0xc000],
      [0.1, 0x2e66],
      [65504, 0x7bff],
      [65519.99, 0x7bff],
      [65520, 0x7c00],
      [1e6, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400],
      [2 ** -24, 0x0001],
      [2 ** -25, 0x0000], // halfway to the smallest subnormal: ties to even, zero
      [1.5 * 2 ** -24, 0x0002], // halfway between 1 and 2 units: to even, 2
      [1 + 2 ** -11, 0x3c00], // halfway between 1 and the next half: to even, 1
      [1 + 3 * 2 ** -11, 0x3c02], // halfway between the first and second half after 1: to even
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above halfway rounds up
      [2047 * 2 ** -25, 0x0400], // rounds up from the largest subnormal into the normals
    ];
    for (const [value, bits] of cases) assert.equal(numberToHalf(value), bits, String(value));
    assert.equal(numberToHalf(-0), 0x8000);
    assert.equal(numberToHalf(NaN), 0x7e00);
  });

  test("every half survives a trip through a number", () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      if ((bits & 0x7c00) === 0x7c00 && (bits & 0x3ff) !== 0) continue; // NaNs: one NaN comes back
      assert.equal(numberToHalf(halfToNumber(bits)), bits);
    }
  });
});

describe("V2 round trips", () => {
  for (const datatype of V2_DATATYPES) {
    const sample = SAMPLES[datatype];

    test(`${datatype} in a JSON request`, () => {
      const encoded = encodeInferenceRequest({ inputs: [sample] });
      assert.equal(encoded.contentType, "application/json");
      assert.equal(encoded.headerLength, undefined);
      assert.deepEqual((headerOf(encoded).inputs as { data: unknown }[])[0]!.data, SAMPLES_AS_JSON[datatype]);
      assertSameTensors(decodeInferenceRequest(encoded.body).inputs, [sample]);
    });

    test(`${datatype} in a binary request`, () => {
      const encoded = encodeInferenceRequest({ inputs: [sample] }, { binaryInputs: true });
      assert.equal(encoded.contentType, "application/octet-stream");
      const input = (headerOf(encoded).inputs as { data?: unknown; parameters: { binary_data_size: number } }[])[0]!;
      assert.equal(input.data, undefined);
      const tail = encoded.body.subarray(encoded.headerLength);
      assert.equal(input.parameters.binary_data_size, tail.byteLength);
      if (!Array.isArray(sample.data)) {
        assert.deepEqual([...tail], [...new Uint8Array(sample.data.buffer)], "the typed array's own little-endian bytes");
      }
      assertSameTensors(decodeInferenceRequest(encoded.body, encoded.headerLength).inputs, [sample]);
    });

    test(`${datatype} in JSON and binary responses`, () => {
      const response = { model_name: "m", outputs: [sample] };
      const asJson = encodeInferenceResponse(response, {});
      assert.equal(asJson.contentType, "application/json");
      assertSameTensors(decodeInferenceResponse(asJson.body).outputs, [sample]);
      const asBinary = encodeInferenceResponse(response, { parameters: { binary_data_output: true } });
      assert.equal(asBinary.contentType, "application/octet-stream");
      assertSameTensors(decodeInferenceResponse(asBinary.body, asBinary.headerLength).outputs, [sample]);
    });
  }

  test("BYTES elements that are not UTF-8 travel as binary data, byte for byte", () => {
    const raw: V2Tensor = { name: "raw", datatype: "BYTES", shape: [3], data: [new Uint8Array([0xff, 0x00, 0xfe]), new Uint8Array([0xc3]), new Uint8Array(300).fill(7)] };
    const request = encodeInferenceRequest({ inputs: [raw] }, { binaryInputs: ["raw"] });
    // Each element: its length as 4 little-endian bytes, then the bytes.
    const tail = request.body.subarray(request.headerLength);
    assert.deepEqual([...tail.subarray(0, 12)], [3, 0, 0, 0, 0xff, 0x00, 0xfe, 1, 0, 0, 0, 0xc3]);
    assert.deepEqual([...tail.subarray(12, 16)], [44, 1, 0, 0]);
    assert.equal(tail.byteLength, 4 + 3 + 4 + 1 + 4 + 300);
    const decoded = decodeInferenceRequest(request.body, request.headerLength);
    assertSameTensors(decoded.inputs, [raw]);
    const response = encodeInferenceResponse({ model_name: "m", outputs: [raw] }, { outputs: [{ name: "raw", parameters: { binary_data: true } }] });
    assertSameTensors(decodeInferenceResponse(response.body, response.headerLength).outputs, [raw]);
  });

  test("a request keeps its id, parameters and requested outputs", () => {
    const request: V2InferenceRequest = {
      id: "req-1",
      parameters: { binary_data_output: true, priority: 2 },
      inputs: [{ ...SAMPLES.INT32, parameters: { content_type: "np" } }],
      outputs: [{ name: "a", parameters: { binary_data: false } }, { name: "b" }],
    };
    for (const binaryInputs of [false, true]) {
      const encoded = encodeInferenceRequest(request, { binaryInputs });
      const decoded = decodeInferenceRequest(encoded.body, encoded.headerLength);
      assert.deepEqual({ ...decoded, inputs: decoded.inputs.map(plain) }, { ...request, inputs: request.inputs.map(plain) });
    }
  });
});

describe("V2 JSON tensor data", () => {
  const decodeOne = (input: Record<string, unknown>): V2Tensor => decodeInferenceRequest(json({ inputs: [{ name: "x", ...input }] })).inputs[0]!;

  test("nested data is flattened row-major and equals flat data", () => {
    const nested = decodeOne({ datatype: "INT32", shape: [2, 3], data: [[1, 2, 3], [4, 5, 6]] });
    const flat = decodeOne({ datatype: "INT32", shape: [2, 3], data: [1, 2, 3, 4, 5, 6] });
    assert.deepEqual(nested.data, new Int32Array([1, 2, 3, 4, 5, 6]));
    assert.deepEqual(flat, nested);
    const cube = decodeOne({ datatype: "FP64", shape: [2, 2, 2], data: [[[1, 2], [3, 4]], [[5, 6], [7, 8]]] });
    assert.deepEqual(cube.data, new Float64Array([1, 2, 3, 4, 5, 6, 7, 8]));
    const strings = decodeOne({ datatype: "BYTES", shape: [2, 1], data: [["a"], ["ü"]] });
    assert.deepEqual(strings.data, [bytes("a"), bytes("ü")]);
  });

  test("scalars and empty tensors", () => {
    assert.deepEqual(decodeOne({ datatype: "FP32", shape: [], data: 7 }).data, new Float32Array([7]));
    assert.deepEqual(decodeOne({ datatype: "FP32", shape: [], data: [7] }).data, new Float32Array([7]));
    assert.deepEqual(decodeOne({ datatype: "FP32", shape: [0], data: [] }).data, new Float32Array(0));
    assert.deepEqual(decodeOne({ datatype: "INT8", shape: [2, 0], data: [[], []] }).data, new Int8Array(0));
    assert.deepEqual(decodeOne({ datatype: "BYTES", shape: [0, 4], data: [] }).data, []);
  });

  test("values JSON numbers cannot hold", () => {
    assert.deepEqual(decodeOne({ datatype: "INT64", shape: [3], data: ["-9223372036854775808", 12, "9007199254740993"] }).data, new BigInt64Array([-(2n ** 63n), 12n, 2n ** 53n + 1n]));
    assert.deepEqual(decodeOne({ datatype: "UINT64", shape: [1], data: ["18446744073709551615"] }).data, new BigUint64Array([2n ** 64n - 1n]));
    const floats = decodeOne({ datatype: "FP32", shape: [4], data: [null, "NaN", "Infinity", "-Infinity"] }).data as Float32Array;
    assert.ok(Number.isNaN(floats[0]) && Number.isNaN(floats[1]));
    assert.deepEqual([...floats.subarray(2)], [Infinity, -Infinity]);
    assert.deepEqual(decodeOne({ datatype: "FP16", shape: [4], data: [0.1, null, "Infinity", 65519] }).data, new Uint16Array([0x2e66, 0x7e00, 0x7c00, 0x7bff]));
    assert.deepEqual(decodeOne({ datatype: "BOOL", shape: [4], data: [true, false, 1, 0] }).data, new Uint8Array([1, 0, 1, 0]));
  });

  test("tensor parameters pass through; binary_data_size is the codec's and is dropped", () => {
    const { body, headerLength } = withBinary('{"inputs":[{"name":"x","datatype":"UINT8","shape":[2],"parameters":{"content_type":"np","binary_data_size":2}},{"name":"y","datatype":"UINT8","shape":[1],"parameters":{"binary_data_size":1},"unknown":1}]}', [1, 2], [3]);
    const [x, y] = decodeInferenceRequest(body, headerLength).inputs;
    assert.deepEqual(x!.parameters, { content_type: "np" });
    assert.equal("parameters" in y!, false);
  });

  test("fields the protocol does not define are ignored", () => {
    const request = decodeInferenceRequest(json({ model_name: "m", extra: [1], inputs: [{ name: "x", datatype: "INT8", shape: [1], data: [1] }] }));
    assert.deepEqual(Object.keys(request), ["inputs"]);
  });
});

describe("V2 binary tensor data", () => {
  /** A request with one FP64 input [2] as binary data whose bytes start at `offset` in the body. */
  function fp64At(offset: number): { body: Uint8Array; headerLength: number } {
    const header = '{"inputs":[{"name":"x","datatype":"FP64","shape":[2],"parameters":{"binary_data_size":16}}]}';
    // JSON may end in whitespace: pad the header to put the binary data where the test wants it.
    const data = new Uint8Array(new Float64Array([1.5, -2]).buffer);
    return withBinary(header.padEnd(offset, " "), [...data]);
  }

  test("numeric data aligned to its element size is a view onto the body, not a copy", () => {
    const { body, headerLength } = fp64At(128);
    assert.equal(headerLength, 128);
    const data = decodeInferenceRequest(body, headerLength).inputs[0]!.data as Float64Array;
    assert.deepEqual([...data], [1.5, -2]);
    assert.equal(data.buffer, body.buffer);
    assert.equal(data.byteOffset, 128);
  });

  test("numeric data that is not aligned is copied once", () => {
    const { body, headerLength } = fp64At(131);
    const data = decodeInferenceRequest(body, headerLength).inputs[0]!.data as Float64Array;
    assert.deepEqual([...data], [1.5, -2]);
    assert.notEqual(data.buffer, body.buffer);
    assert.equal(data.buffer.byteLength, 16);
  });

  test("a Buffer body decodes as a Uint8Array does, aligned or not", () => {
    for (const offset of [128, 131]) {
      const { body, headerLength } = fp64At(offset);
      // Buffers share one pooled ArrayBuffer, so the body does not start at its buffer's start.
      const buffer = Buffer.from(body);
      const data = decodeInferenceRequest(buffer, headerLength).inputs[0]!.data as Float64Array;
      assert.deepEqual([...data], [1.5, -2], `offset ${offset}`);
    }
  });

  test("alignment counts from the start of the underlying buffer", () => {
    // The body sits at offset 1 of a bigger buffer, as a slice of a larger read would.
    const { body } = fp64At(127);
    const shifted = new Uint8Array(body.byteLength + 1);
    shifted.set(body, 1);
    const data = decodeInferenceRequest(shifted.subarray(1), 127).inputs[0]!.data as Float64Array;
    assert.equal(data.buffer, shifted.buffer, "127 + 1 is aligned");
    assert.deepEqual([...data], [1.5, -2]);
  });

  test("BYTES elements are views onto the body", () => {
    const { body, headerLength } = withBinary('{"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":14}}]}', [2, 0, 0, 0, 0xc3, 0xa9], [4, 0, 0, 0, 0xf0, 0x9f, 0x90, 0x9f]);
    const data = decodeInferenceRequest(body, headerLength).inputs[0]!.data as Uint8Array[];
    assert.deepEqual(data.map((element) => text.decode(element)), ["é", "🐟"]);
    assert.ok(data.every((element) => element.buffer === body.buffer));
  });

  test("binary and JSON inputs mix in one request; binary data follows in input order", () => {
    const header = JSON.stringify({
      inputs: [
        { name: "a", datatype: "INT16", shape: [2], parameters: { binary_data_size: 4 } },
        { name: "b", datatype: "BYTES", shape: [1], data: ["json"] },
        { name: "c", datatype: "BOOL", shape: [3], parameters: { binary_data_size: 3 } },
        { name: "d", datatype: "FP32", shape: [1, 2], data: [[0.5, 1]] },
      ],
    });
    const { body, headerLength } = withBinary(header, [0xff, 0xff, 0x02, 0x01], [1, 0, 1]);
    const inputs = decodeInferenceRequest(body, String(headerLength)).inputs;
    assert.deepEqual(
      inputs.map((input) => [input.name, Array.isArray(input.data) ? input.data.map((b) => text.decode(b)) : [...input.data]]),
      [
        ["a", [-1, 0x0102]],
        ["b", ["json"]],
        ["c", [1, 0, 1]],
        ["d", [0.5, 1]],
      ],
    );
    // The encoder builds the same layout.
    const again = encodeInferenceRequest({ inputs }, { binaryInputs: ["a", "c"] });
    assert.deepEqual([...again.body.subarray(again.headerLength)], [0xff, 0xff, 0x02, 0x01, 1, 0, 1]);
  });

  test("the header length may cover the whole body, or come as the header's text", () => {
    const body = json({ inputs: [{ name: "x", datatype: "UINT8", shape: [1], data: [9] }] });
    assert.deepEqual(decodeInferenceRequest(body, body.byteLength).inputs[0]!.data, new Uint8Array([9]));
    assert.deepEqual(decodeInferenceRequest(body, ` ${body.byteLength} `).inputs[0]!.data, new Uint8Array([9]));
  });
});

describe("V2 responses", () => {
  const outputs: V2Tensor[] = [
    { name: "a", datatype: "INT32", shape: [2], data: new Int32Array([1, 2]) },
    { name: "b", datatype: "FP32", shape: [1], data: new Float32Array([0.5]), parameters: { note: "kept" } },
    { name: "c", datatype: "BYTES", shape: [1], data: [bytes("c")] },
  ];
  const response = { model_name: "m", model_version: "3", id: "r1", outputs };

  /** Which outputs of an encoded response are binary, by name, in order. */
  function layout(encoded: V2Body): [string, "json" | number][] {
    return (headerOf(encoded).outputs as { name: string; data?: unknown; parameters?: { binary_data_size?: number } }[]).map((o) => [o.name, o.data === undefined ? o.parameters!.binary_data_size! : "json"]);
  }

  test("all outputs as JSON by default", () => {
    const encoded = encodeInferenceResponse(response, {});
    assert.equal(encoded.contentType, "application/json");
    assert.equal(encoded.headerLength, undefined);
    assert.deepEqual(JSON.parse(text.decode(encoded.body)), {
      model_name: "m",
      model_version: "3",
      id: "r1",
      outputs: [
        { name: "a", datatype: "INT32", shape: [2], data: [1, 2] },
        { name: "b", datatype: "FP32", shape: [1], parameters: { note: "kept" }, data: [0.5] },
        { name: "c", datatype: "BYTES", shape: [1], data: ["c"] },
      ],
    });
  });

  test("fields left out stay out", () => {
    const encoded = encodeInferenceResponse({ model_name: "m", outputs: [] }, {});
    assert.equal(text.decode(encoded.body), '{"model_name":"m","outputs":[]}');
  });

  test("binary_data_output on the request makes every output binary", () => {
    const encoded = encodeInferenceResponse(response, { parameters: { binary_data_output: true } });
    assert.equal(encoded.contentType, "application/octet-stream");
    assert.deepEqual(layout(encoded), [["a", 8], ["b", 4], ["c", 5]]);
    assert.equal(encoded.body.byteLength, encoded.headerLength! + 17);
    assert.deepEqual((headerOf(encoded).outputs as { parameters: unknown }[])[1]!.parameters, { note: "kept", binary_data_size: 4 });
    assert.deepEqual([...encoded.body.subarray(encoded.headerLength)], [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0x3f, 1, 0, 0, 0, 0x63]);
  });

  test("an output's own binary_data wins over binary_data_output", () => {
    const one = encodeInferenceResponse(response, { outputs: [{ name: "a" }, { name: "b", parameters: { binary_data: true } }] });
    assert.deepEqual(layout(one), [["a", "json"], ["b", 4]]);
    assert.equal(one.contentType, "application/octet-stream");
    const allBut = encodeInferenceResponse(response, { parameters: { binary_data_output: true }, outputs: [{ name: "c", parameters: { binary_data: false } }, { name: "a" }] });
    assert.deepEqual(layout(allBut), [["c", "json"], ["a", 8]]);
  });

  test("requested outputs choose which outputs appear, in the request's order", () => {
    const encoded = encodeInferenceResponse(response, { outputs: [{ name: "c" }, { name: "a" }] });
    assert.deepEqual(layout(encoded), [["c", "json"], ["a", "json"]]);
    assert.deepEqual(layout(encodeInferenceResponse(response, { outputs: [] })), [["a", "json"], ["b", "json"], ["c", "json"]], "an empty list asks for all");
  });

  test("an unknown requested output is the client's error and names it", () => {
    assertClientError(() => encodeInferenceResponse(response, { outputs: [{ name: "a" }, { name: "nope" }] }), "model 'm' has no output 'nope'; its outputs: 'a', 'b', 'c'");
  });

  test("an output of zero bytes asked for as binary still makes a binary body", () => {
    const empty = encodeInferenceResponse({ model_name: "m", outputs: [{ name: "e", datatype: "FP32", shape: [0, 3], data: new Float32Array(0) }] }, { parameters: { binary_data_output: true } });
    assert.equal(empty.contentType, "application/octet-stream");
    assert.equal(empty.headerLength, empty.body.byteLength);
    assert.deepEqual(layout(empty), [["e", 0]]);
  });

  test("BYTES that are not UTF-8 cannot be sent as JSON", () => {
    const raw = { model_name: "m", outputs: [{ name: "raw", datatype: "BYTES" as const, shape: [2], data: [bytes("ok"), new Uint8Array([0xff])] }] };
    assertClientError(() => encodeInferenceResponse(raw, {}), "output 'raw': BYTES element 1 is not valid UTF-8, so it cannot be a JSON string; only binary data can carry it");
    assert.equal(encodeInferenceResponse(raw, { parameters: { binary_data_output: true } }).contentType, "application/octet-stream");
  });

  test("outputs whose data does not fit their datatype and shape are the server's error", () => {
    const encode = (output: Partial<V2Tensor>): V2Body => encodeInferenceResponse({ model_name: "m", outputs: [{ name: "y", datatype: "FP32", shape: [2], data: new Float32Array(2), ...output } as V2Tensor] }, {});
    assertEncodingError(() => encode({ shape: [2, 3] }), /^output 'y': data has 2 elements where shape \[2, 3\] needs 6$/);
    assertEncodingError(() => encode({ data: new Float64Array(2) }), /^output 'y': FP32 data must be a Float32Array; got Float64Array$/);
    assertEncodingError(() => encode({ datatype: "BYTES" }), /^output 'y': BYTES data must be an array of Uint8Array; got Float32Array$/);
    assertEncodingError(() => encode({ datatype: "FLOAT" as V2Datatype }), /^output 'y' has datatype "FLOAT"; the datatypes are BOOL, UINT8, /);
    assertEncodingError(() => encode({ shape: [2n] as unknown as number[] }), /^output 'y': shape must be a list of whole numbers >= 0; got 2$/);
    assertEncodingError(() => encode({ shape: [-1] }), /^output 'y': shape must be a list of whole numbers >= 0; got \[-1\] \(-1, a variable dimension/);
    assertEncodingError(() => encode({ datatype: "BOOL", data: new Uint8Array([1, 2]) }), /^output 'y': BOOL element 1 is 2; BOOL elements are 0 \(false\) or 1 \(true\)$/);
    assertEncodingError(() => encode({ data: [1, 2] as unknown as V2Tensor["data"] }), /FP32 data must be a Float32Array; got an array of other values$/);
  });
});

describe("the Triton binary tensor data extension's example", () => {
  // The request of docs/protocol/extension_binary_data.md, as the specification prints it: two
  // inputs as binary data (16 + 3 bytes) and output0 asked for as binary data.
  const header = `{
  "model_name" : "mymodel",
  "inputs" : [
    {
      "name" : "input0",
      "shape" : [ 2, 2 ],
      "datatype" : "UINT32",
      "parameters" : {
        "binary_data_size" : 16
      }
    },
    {
      "name" : "input1",
      "shape" : [ 3 ],
      "datatype" : "BOOL",
      "parameters" : {
        "binary_data_size" : 3
      }
    }
  ],
  "outputs" : [
    {
      "name" : "output0",
      "parameters" : {
        "binary_data" : true
      }
    }
  ]
}`;
  // input0 = [[1, 2], [3, 0x01020304]] as little-endian UINT32; input1 = [true, false, true].
  const input0 = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0x04, 0x03, 0x02, 0x01];
  const input1 = [1, 0, 1];

  test("the request decodes", () => {
    const { body, headerLength } = withBinary(header, input0, input1);
    assert.equal(body.byteLength, headerLength + 19, "Content-Length is the header's length + 19");
    const request = decodeInferenceRequest(body, headerLength);
    assert.deepEqual(request.inputs, [
      { name: "input0", datatype: "UINT32", shape: [2, 2], data: new Uint32Array([1, 2, 3, 0x01020304]) },
      { name: "input1", datatype: "BOOL", shape: [3], data: new Uint8Array([1, 0, 1]) },
    ]);
    assert.deepEqual(request.outputs, [{ name: "output0", parameters: { binary_data: true } }]);
  });

  test("the response: output0 FP32 [3, 2] as 24 bytes after the JSON header", () => {
    const request = decodeInferenceRequest(...(Object.values(withBinary(header, input0, input1)) as [Uint8Array, number]));
    const output0: V2Tensor = { name: "output0", datatype: "FP32", shape: [3, 2], data: new Float32Array([1, 2, 0.5, -1, 0, 1.5]) };
    const extra: V2Tensor = { name: "output1", datatype: "INT8", shape: [1], data: new Int8Array([1]) };
    const encoded = encodeInferenceResponse({ model_name: "mymodel", outputs: [extra, output0] }, request);
    const expectedHeader = '{"model_name":"mymodel","outputs":[{"name":"output0","datatype":"FP32","shape":[3,2],"parameters":{"binary_data_size":24}}]}';
    assert.equal(encoded.contentType, "application/octet-stream");
    assert.equal(encoded.headerLength, expectedHeader.length);
    assert.equal(text.decode(encoded.body.subarray(0, encoded.headerLength)), expectedHeader);
    // 1, 2, 0.5, -1, 0, 1.5 as little-endian IEEE 754 single floats.
    const floats = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x3f];
    assert.deepEqual([...encoded.body.subarray(encoded.headerLength)], floats);
    assert.equal(encoded.body.byteLength, expectedHeader.length + 24);
  });
});

describe("V2 request errors", () => {
  const input = (fields: Record<string, unknown>): Uint8Array => json({ inputs: [{ name: "x", datatype: "INT32", shape: [2], data: [1, 2], ...fields }] });
  const binaryInput = (parameters: Record<string, unknown>, ...parts: number[][]) =>
    withBinary(JSON.stringify({ inputs: [{ name: "x", datatype: "INT32", shape: [2], parameters }] }), ...parts);

  test("invalid JSON", () => {
    assertClientError(() => decodeInferenceRequest(utf8.encode('{"inputs": [')), /^the request's JSON is invalid: /);
    assertClientError(() => decodeInferenceRequest(new Uint8Array([0x7b, 0xff, 0x7d])), /^the request's JSON is invalid: /);
    const { body, headerLength } = binaryInput({ binary_data_size: 8 }, [1, 0, 0, 0, 2, 0, 0, 0]);
    assertClientError(() => decodeInferenceRequest(body, headerLength - 1), /^the request's JSON \(its first \d+ bytes, by Inference-Header-Content-Length\) is invalid: /);
  });

  test("a bad Inference-Header-Content-Length", () => {
    const body = input({});
    for (const bad of [body.byteLength + 1, -1, 1.5, "12a", "", "0x10"]) {
      assertClientError(() => decodeInferenceRequest(body, bad), `Inference-Header-Content-Length is ${JSON.stringify(bad)}; it must be a whole number of bytes, at most the body's ${body.byteLength}`);
    }
  });

  test("a request that is not an object with inputs", () => {
    assertClientError(() => decodeInferenceRequest(json([1])), 'the request must be a JSON object with "inputs"; got [1]');
    assertClientError(() => decodeInferenceRequest(json({})), '"inputs" must be a list of tensors; got undefined');
    assertClientError(() => decodeInferenceRequest(json({ inputs: { x: 1 } })), '"inputs" must be a list of tensors; got {"x":1}');
    assertClientError(() => decodeInferenceRequest(json({ id: 7, inputs: [] })), 'the request: "id" must be a string; got 7');
    assertClientError(() => decodeInferenceRequest(json({ parameters: [], inputs: [] })), "the request: parameters must be an object; got []");
    assertClientError(() => decodeInferenceRequest(json({ parameters: { binary_data_output: "yes" }, inputs: [] })), 'the request: parameters.binary_data_output must be true or false; got "yes"');
  });

  test("an input without a name, datatype or shape", () => {
    assertClientError(() => decodeInferenceRequest(json({ inputs: [7] })), 'input 0 must be an object with a "name" string, a "datatype", a "shape" and "data"');
    assertClientError(() => decodeInferenceRequest(input({ name: "" })), /^input 0 must be an object with a "name" string/);
    assertClientError(() => decodeInferenceRequest(input({ datatype: "FLOAT32" })), 'input \'x\' has datatype "FLOAT32"; the datatypes are BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES');
    assertClientError(() => decodeInferenceRequest(input({ datatype: "int32" })), /^input 'x' has datatype "int32"/);
    assertClientError(() => decodeInferenceRequest(input({ datatype: undefined })), /^input 'x' has datatype undefined/);
    assertClientError(() => decodeInferenceRequest(input({ shape: [-1] })), "input 'x': shape must be a list of whole numbers >= 0; got [-1] (-1, a variable dimension, belongs in model metadata, not in a tensor)");
    assertClientError(() => decodeInferenceRequest(input({ shape: [2.5] })), "input 'x': shape must be a list of whole numbers >= 0; got [2.5]");
    assertClientError(() => decodeInferenceRequest(input({ shape: "2" })), 'input \'x\': shape must be a list of whole numbers >= 0; got "2"');
    assertClientError(() => decodeInferenceRequest(input({ parameters: "p" })), 'input \'x\': parameters must be an object; got "p"');
  });

  test("data whose length does not fit the shape", () => {
    assertClientError(() => decodeInferenceRequest(input({ shape: [2, 2] })), "input 'x': data has 2 elements where shape [2, 2] needs 4");
    assertClientError(() => decodeInferenceRequest(input({ shape: [] })), "input 'x': data has 2 elements where shape [] needs 1");
    assertClientError(() => decodeInferenceRequest(input({ shape: [1e12, 1e6] , data: [[1]] })), "input 'x': shape [1000000000000, 1000000] needs 1000000000000000000 elements, more than the JSON could hold");
  });

  test("data nested neither flat nor as the shape", () => {
    const nested = (shape: number[], data: unknown) => () => decodeInferenceRequest(input({ shape, data }));
    assertClientError(nested([2, 2], [[1, 2], [3]]), "input 'x': data is neither flat nor nested as shape [2, 2]: data[1] has 1 elements where 2 were expected");
    assertClientError(nested([2, 2], [[1, 2], 3]), "input 'x': data is neither flat nor nested as shape [2, 2]: data[1] is a single value where a list of 2 was expected");
    assertClientError(nested([2, 2], [[1, 2], [3, [4]]]), "input 'x': data is neither flat nor nested as shape [2, 2]: data[1][1] is a list where a single value was expected");
    assertClientError(nested([4], [[1, 2], [3, 4]]), "input 'x': data is neither flat nor nested as shape [4]: data has 2 elements where 4 were expected");
    assertClientError(nested([2, 1, 2], [[[1, 2]], [[3, 4], [5, 6]]]), "input 'x': data is neither flat nor nested as shape [2, 1, 2]: data[1] has 2 elements where 1 were expected");
    assertClientError(nested([2], "12"), "input 'x': data is neither flat nor nested as shape [2]: data is a single value where a list of 2 was expected");
  });

  test("elements that do not fit the datatype", () => {
    const element = (datatype: V2Datatype, value: unknown) => () => decodeInferenceRequest(input({ datatype, shape: [2, 1], data: [[datatype === "BYTES" ? "a" : 0], [value]] }));
    assertClientError(element("INT32", "3"), 'input \'x\': data[1][0] is "3"; INT32 takes whole numbers from -2147483648 to 2147483647');
    assertClientError(element("INT8", 1.5), "input 'x': data[1][0] is 1.5; INT8 takes whole numbers from -128 to 127");
    assertClientError(element("UINT8", 256), "input 'x': data[1][0] is 256; UINT8 takes whole numbers from 0 to 255");
    assertClientError(element("UINT16", -1), "input 'x': data[1][0] is -1; UINT16 takes whole numbers from 0 to 65535");
    assertClientError(element("UINT32", null), "input 'x': data[1][0] is null; UINT32 takes whole numbers from 0 to 4294967295");
    assertClientError(element("INT64", 2 ** 60), "input 'x': data[1][0] is 1152921504606847000, beyond 2^53 - 1 where JSON numbers lose digits; send INT64 values that large as decimal strings");
    assertClientError(element("INT64", "9223372036854775808"), 'input \'x\': data[1][0] is "9223372036854775808"; INT64 takes whole numbers from -9223372036854775808 to 9223372036854775807 (beyond 2^53 - 1 as decimal strings)');
    assertClientError(element("UINT64", "1e3"), /^input 'x': data\[1\]\[0\] is "1e3"; UINT64 takes whole numbers from 0 to 18446744073709551615/);
    assertClientError(element("BOOL", 2), "input 'x': data[1][0] is 2; BOOL takes true or false (or 1 or 0)");
    assertClientError(element("FP32", "inf"), 'input \'x\': data[1][0] is "inf"; FP32 takes numbers, null (NaN) or the strings "NaN", "Infinity" and "-Infinity"');
    assertClientError(element("FP16", true), /^input 'x': data\[1\]\[0\] is true; FP16 takes numbers/);
    assertClientError(element("FP64", { v: 1 }), /^input 'x': data\[1\]\[0\] is \{"v":1\}; FP64 takes numbers/);
    assertClientError(element("BYTES", 5), "input 'x': data[1][0] is 5; BYTES takes strings");
    assertClientError(element("INT16", "a very long string that goes on and on and on"), 'input \'x\': data[1][0] is "a very long string that goes on and ...; INT16 takes whole numbers from -32768 to 32767');
    assertClientError(() => decodeInferenceRequest(input({ data: [1, [2]] })), "input 'x': data[1] is [2]; INT32 takes whole numbers from -2147483648 to 2147483647");
  });

  test("data and binary_data_size: both, or neither", () => {
    assertClientError(() => decodeInferenceRequest(input({ data: undefined })), "input 'x' has no data and no parameters.binary_data_size");
    const { body, headerLength } = withBinary(JSON.stringify({ inputs: [{ name: "x", datatype: "INT32", shape: [2], data: [1, 2], parameters: { binary_data_size: 8 } }] }), [1, 0, 0, 0, 2, 0, 0, 0]);
    assertClientError(() => decodeInferenceRequest(body, headerLength), "input 'x' has both data and parameters.binary_data_size; give one");
  });

  test("binary_data_size without Inference-Header-Content-Length", () => {
    const { body } = binaryInput({ binary_data_size: 8 }, [1, 0, 0, 0, 2, 0, 0, 0]);
    assertClientError(() => decodeInferenceRequest(body.subarray(0, body.byteLength - 8)), "input 'x' has parameters.binary_data_size but the request has no Inference-Header-Content-Length header");
  });

  test("binary_data_size that is not a size", () => {
    for (const size of [-1, 1.5, "8", null]) {
      const { body, headerLength } = binaryInput({ binary_data_size: size }, [1, 0, 0, 0, 2, 0, 0, 0]);
      assertClientError(() => decodeInferenceRequest(body, headerLength), `input 'x': parameters.binary_data_size must be a whole number of bytes; got ${JSON.stringify(size)}`);
    }
  });

  test("binary_data_size beyond the body", () => {
    const { body, headerLength } = binaryInput({ binary_data_size: 12 }, [1, 0, 0, 0, 2, 0, 0, 0]);
    assertClientError(() => decodeInferenceRequest(body, headerLength), "input 'x': binary_data_size is 12 but only 8 bytes of binary data are left after the JSON header and the tensors before it");
  });

  test("binary_data_size that does not fit the shape", () => {
    const { body, headerLength } = binaryInput({ binary_data_size: 4 }, [1, 0, 0, 0]);
    assertClientError(() => decodeInferenceRequest(body, headerLength), "input 'x': binary_data_size is 4 where shape [2] of INT32 takes 8 bytes");
  });

  test("binary data that no input accounts for", () => {
    const { body, headerLength } = binaryInput({ binary_data_size: 8 }, [1, 0, 0, 0, 2, 0, 0, 0], [9, 9]);
    assertClientError(() => decodeInferenceRequest(body, headerLength), "the request has 2 bytes of binary data that no tensor's binary_data_size accounts for");
    const plain = withBinary(JSON.stringify({ inputs: [] }), [1]);
    assertClientError(() => decodeInferenceRequest(plain.body, plain.headerLength), "the request has 1 bytes of binary data that no tensor's binary_data_size accounts for");
  });

  test("binary BOOL bytes other than 0 and 1", () => {
    const { body, headerLength } = withBinary(JSON.stringify({ inputs: [{ name: "b", datatype: "BOOL", shape: [3], parameters: { binary_data_size: 3 } }] }), [1, 0, 2]);
    assertClientError(() => decodeInferenceRequest(body, headerLength), "input 'b': BOOL element 2 is the byte 2; binary BOOL elements are 0 (false) or 1 (true)");
  });

  test("binary BYTES elements that overrun or miscount", () => {
    const bytesInput = (shape: number[], ...parts: number[][]) => {
      const size = parts.reduce((n, part) => n + part.length, 0);
      const { body, headerLength } = withBinary(JSON.stringify({ inputs: [{ name: "s", datatype: "BYTES", shape, parameters: { binary_data_size: size } }] }), ...parts);
      return () => decodeInferenceRequest(body, headerLength);
    };
    assertClientError(bytesInput([2], [1, 0, 0, 0, 0x61], [1, 0]), "input 's': BYTES element 1 at byte 5 is cut short: its length takes 4 bytes but 2 remain");
    assertClientError(bytesInput([1], [5, 0, 0, 0, 0x61, 0x62]), "input 's': BYTES element 0 is 5 bytes long but only 2 bytes of its binary_data_size remain");
    assertClientError(bytesInput([1], [255, 255, 255, 255]), "input 's': BYTES element 0 is 4294967295 bytes long but only 0 bytes of its binary_data_size remain");
    assertClientError(bytesInput([3], [1, 0, 0, 0, 0x61], [0, 0, 0, 0]), "input 's': binary data holds 2 BYTES elements where shape [3] needs 3");
    assertClientError(bytesInput([1], [0, 0, 0, 0], [0, 0, 0, 0]), "input 's': binary data holds more than the 1 BYTES elements of shape [1]: 4 bytes are left after them");
  });

  test("JSON numbers beyond a float datatype's range, which would read as infinities", () => {
    const float = (datatype: V2Datatype, value: string) => () => decodeInferenceRequest(utf8.encode(`{"inputs":[{"name":"x","datatype":"${datatype}","shape":[2],"data":[0,${value}]}]}`));
    const hint = 'send an infinity as the string "Infinity" or "-Infinity"';
    for (const datatype of ["FP16", "FP32", "FP64"] as const) {
      assertClientError(float(datatype, "1e400"), `input 'x': data[1] is a number beyond the range of doubles (it reads as Infinity); ${hint}`);
      assertClientError(float(datatype, "-1e400"), `input 'x': data[1] is a number beyond the range of doubles (it reads as -Infinity); ${hint}`);
    }
    assertClientError(float("FP32", "3.5e38"), `input 'x': data[1] is 3.5e+38, beyond the range of FP32; ${hint}`);
    assertClientError(float("FP16", "-65520"), `input 'x': data[1] is -65520, beyond the range of FP16; ${hint}`);
    // The largest finite values of each, and everything JSON.parse reads as a finite double.
    const one = (datatype: V2Datatype, value: number) => decodeInferenceRequest(json({ inputs: [{ name: "x", datatype, shape: [1], data: [value] }] })).inputs[0]!.data;
    assert.deepEqual(one("FP16", -65519.9), Uint16Array.of(0xfbff));
    assert.deepEqual(one("FP32", 3.4028235e38), Float32Array.of(3.4028234663852886e38));
    assert.deepEqual(one("FP64", 1.7976931348623157e308), Float64Array.of(Number.MAX_VALUE));
  });

  test("shapes beyond the request's limits are refused before their data is read", () => {
    const limits = { maxTensorElements: 10, maxBytesElements: 3 };
    const request = (...inputs: unknown[]) => json({ inputs });
    const tensor = (name: string, datatype: V2Datatype, shape: number[], data: unknown = []) => ({ name, datatype, shape, data });
    const ok = decodeInferenceRequest(request(tensor("a", "INT8", [2, 3], [1, 2, 3, 4, 5, 6]), tensor("b", "BYTES", [3], ["x", "y", "z"]), tensor("c", "FP32", [1], [0])), undefined, limits);
    assert.equal(ok.inputs.length, 3);
    // Every input counts; the data is never looked at, so 1e12 elements cost nothing.
    assertClientError(
      () => decodeInferenceRequest(request(tensor("a", "INT8", [2, 3], [1, 2, 3, 4, 5, 6]), tensor("b", "FP32", [5])), undefined, limits),
      "input 'b': the request would hold 11 tensor elements, more than the server's limit of 10 (--max-tensor-elements)",
    );
    assertClientError(() => decodeInferenceRequest(request(tensor("a", "FP64", [1e6, 1e6])), undefined, limits), "input 'a': the request would hold 1000000000000 tensor elements, more than the server's limit of 10 (--max-tensor-elements)");
    assertClientError(
      () => decodeInferenceRequest(request(tensor("a", "BYTES", [2], ["x", "y"]), tensor("b", "BYTES", [2])), undefined, limits),
      "input 'b': the request would hold 4 BYTES elements, more than the server's limit of 3 (--max-bytes-elements)",
    );
    const { body, headerLength } = withBinary(JSON.stringify({ inputs: [{ name: "s", datatype: "BYTES", shape: [4], parameters: { binary_data_size: 16 } }] }), new Array(16).fill(0));
    assertClientError(() => decodeInferenceRequest(body, headerLength, limits), "input 's': the request would hold 4 BYTES elements, more than the server's limit of 3 (--max-bytes-elements)");
    assert.equal((decodeInferenceRequest(body, headerLength).inputs[0]!.data as Uint8Array[]).length, 4);
  });

  test("names that appear twice", () => {
    const twice = json({ inputs: [{ name: "x", datatype: "INT8", shape: [1], data: [1] }, { name: "x", datatype: "INT8", shape: [1], data: [2] }] });
    assertClientError(() => decodeInferenceRequest(twice), "input 'x' appears twice");
    assertClientError(() => decodeInferenceRequest(json({ inputs: [], outputs: [{ name: "y" }, { name: "y" }] })), "requested output 'y' appears twice");
  });

  test("requested outputs that are not names with parameters", () => {
    assertClientError(() => decodeInferenceRequest(json({ inputs: [], outputs: "y" })), '"outputs" must be a list of { "name": ..., "parameters": ... }; got "y"');
    assertClientError(() => decodeInferenceRequest(json({ inputs: [], outputs: [{ name: 1 }] })), 'requested output 0 must be an object with a "name" string');
    assertClientError(() => decodeInferenceRequest(json({ inputs: [], outputs: [{ name: "y", parameters: 1 }] })), "requested output 'y': parameters must be an object; got 1");
    assertClientError(() => decodeInferenceRequest(json({ inputs: [], outputs: [{ name: "y", parameters: { binary_data: 1 } }] })), "requested output 'y': parameters.binary_data must be true or false; got 1");
  });

  test("errors carry the bad request prefix of the error table", () => {
    assert.throws(() => decodeInferenceRequest(json({})), (err: unknown) => (err as ShoalError).publicMessage === 'bad request: "inputs" must be a list of tensors; got undefined');
  });
});

describe("V2 response decoding errors", () => {
  test("a response needs model_name and outputs", () => {
    assertClientError(() => decodeInferenceResponse(json({ outputs: [] })), 'the response must be a JSON object with "model_name" and "outputs"; got {"outputs":[]}');
    assertClientError(() => decodeInferenceResponse(json({ model_name: "m" })), '"outputs" must be a list of tensors; got undefined');
    assertClientError(() => decodeInferenceResponse(json({ model_name: "m", model_version: 1, outputs: [] })), 'the response: "model_version" must be a string; got 1');
  });

  test("a binary output without the header length", () => {
    const encoded = encodeInferenceResponse({ model_name: "m", outputs: [SAMPLES.INT8] }, { parameters: { binary_data_output: true } });
    assertClientError(() => decodeInferenceResponse(encoded.body.subarray(0, encoded.headerLength)), "output 'i8' has parameters.binary_data_size but the response has no Inference-Header-Content-Length header");
  });
});

describe("inputs checked against a model's declared inputs", () => {
  const declared = [
    { name: "x", datatype: "FP32" as const, shape: [-1, 2] },
    { name: "s", datatype: "BYTES" as const, shape: [1] },
  ];
  const x = (fields: Partial<V2Tensor> = {}): V2Tensor => ({ name: "x", datatype: "FP32", shape: [3, 2], data: new Float32Array(6), ...fields });
  const s = (fields: Partial<V2Tensor> = {}): V2Tensor => ({ name: "s", datatype: "BYTES", shape: [1], data: [bytes("a")], ...fields });

  test("inputs of the declared names, datatypes, ranks and fixed sizes pass, in any order", () => {
    checkDeclaredInputs([s(), x()], declared);
    checkDeclaredInputs([x({ shape: [0, 2], data: new Float32Array(0) }), s()], declared);
    checkDeclaredInputs([], []);
  });

  test("anything else is the client's error, naming the input", () => {
    assertClientError(() => checkDeclaredInputs([x({ datatype: "FP16", data: new Uint16Array(6) }), s()], declared), "input 'x' is FP16; the model takes FP32");
    assertClientError(() => checkDeclaredInputs([x({ shape: [6] }), s()], declared), "input 'x' has shape [6]; the model takes FP32 [-1, 2]");
    assertClientError(() => checkDeclaredInputs([x({ shape: [2, 3] }), s()], declared), "input 'x' has shape [2, 3]; the model takes FP32 [-1, 2]");
    assertClientError(() => checkDeclaredInputs([x({ shape: [1, 2, 3] }), s()], declared), "input 'x' has shape [1, 2, 3]; the model takes FP32 [-1, 2]");
    assertClientError(() => checkDeclaredInputs([x(), s({ shape: [2] })], declared), "input 's' has shape [2]; the model takes BYTES [1]");
    assertClientError(() => checkDeclaredInputs([x(), s(), x({ name: "y" })], declared), "the model has no input 'y'; its inputs: x (FP32 [-1, 2]), s (BYTES [1])");
    assertClientError(() => checkDeclaredInputs([x()], declared), "missing input 's' (BYTES [1])");
    assertClientError(() => checkDeclaredInputs([x()], []), "the model has no input 'x'; its inputs: none");
  });
});
