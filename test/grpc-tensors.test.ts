/**
 * A gRPC inference request as the worker gets it: the V2 body in pieces, raw contents left in
 * their message's buffer (moved back to aligned offsets) when the message had that buffer to
 * itself, copied when it did not, and the buffers that move to the worker; and answers framed
 * with their outputs appended, read back as protobuf.js reads them.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ServiceDefinition } from "@grpc/grpc-js";
import { MESSAGE_BUFFER, tolerant } from "../src/grpc/decode.js";
import { inferFrame, streamFrame, type Serialize } from "../src/grpc/answers.js";
import { PREFIX } from "../src/grpc/message-frames.js";
import { requestBody, type InferRequestMessage } from "../src/grpc/tensors.js";
import { decodeInferenceRequest } from "../src/v2/index.js";
import { UNLIMITED } from "../src/limits.js";
import { definition } from "./grpc-helpers.js";

const infer = tolerant(definition["inference.GRPCInferenceService"] as unknown as ServiceDefinition, UNLIMITED).ModelInfer!;

// A message as @grpc/grpc-js hands it to the decoder: the contents of a frame read into a buffer
// of its own (5 bytes of prefix, then the message), or into a shared pool as small ones are.
function received(request: object, pooled = false): InferRequestMessage {
  const bytes = infer.requestSerialize(request);
  // A message of its own, as grpc-js joins a large one: exactly its buffer (Node 24's concat may
  // hand a mid-sized result a larger one), or one inside a larger pool.
  const own = Buffer.from(new ArrayBuffer(5 + bytes.byteLength));
  own.set(bytes, 5);
  const framed = pooled ? Buffer.concat([Buffer.alloc(64 * 1024), Buffer.alloc(5), bytes]).subarray(64 * 1024) : own;
  return infer.requestDeserialize(framed.subarray(5)) as InferRequestMessage;
}

const f64 = Float64Array.from({ length: 1000 }, (_, i) => i / 7);
const i8 = Int8Array.of(-1, 2, -3);
const f32 = Float32Array.from({ length: 999 }, (_, i) => -i / 3);
const request = {
  model_name: "m",
  inputs: [
    { name: "a", datatype: "FP64", shape: [1000] },
    { name: "b", datatype: "INT8", shape: [3] },
    { name: "c", datatype: "FP32", shape: [999] },
  ],
  raw_input_contents: [Buffer.from(f64.buffer), Buffer.from(i8.buffer), Buffer.from(f32.buffer)],
};

describe("gRPC requests as V2 bodies", () => {
  test("raw contents stay in a message's own buffer, moved to offsets their elements can be viewed at, and that buffer moves to the worker", () => {
    const message = received(request);
    const buffer = message[MESSAGE_BUFFER]!;
    assert.ok(buffer instanceof ArrayBuffer);
    const { body, bytes, transfer } = requestBody(message);
    assert.deepEqual(
      body.parts.map((p) => p.buffer === buffer),
      [true, true, true],
    );
    assert.equal(body.parts[0]!.byteOffset % 8, 0);
    assert.equal(body.parts[2]!.byteOffset % 4, 0);
    assert.deepEqual(new Set(transfer), new Set([body.header.buffer, buffer]));
    assert.equal(bytes, body.header.byteLength + 8000 + 3 + 3996);
    const decoded = decodeInferenceRequest(body);
    assert.deepEqual(
      decoded.inputs.map((t) => [t.name, t.datatype, t.shape]),
      [
        ["a", "FP64", [1000]],
        ["b", "INT8", [3]],
        ["c", "FP32", [999]],
      ],
    );
    assert.deepEqual(decoded.inputs[0]!.data, f64);
    assert.deepEqual(decoded.inputs[1]!.data, i8);
    assert.deepEqual(decoded.inputs[2]!.data, f32);
    // Views, not copies: the worker reads the bytes where they arrived.
    assert.equal((decoded.inputs[0]!.data as Float64Array).buffer, buffer);
    assert.equal((decoded.inputs[2]!.data as Float32Array).buffer, buffer);
  });

  test("raw contents of a message in a shared buffer are copied, each into a buffer of its own", () => {
    const message = received(request, true);
    assert.equal(message[MESSAGE_BUFFER], undefined);
    const { body, transfer } = requestBody(message);
    const shared = message.raw_input_contents[0]!.buffer;
    for (const part of body.parts) {
      assert.notEqual(part.buffer, shared);
      assert.equal(part.buffer.byteLength, part.byteLength);
    }
    assert.equal(transfer.length, 4);
    assert.deepEqual(decodeInferenceRequest(body).inputs[2]!.data, f32);
  });

  test("raw contents that fill little of their message's own buffer (the rest fields protobuf skips) are copied out: the buffer is not kept for them", () => {
    // A 4-byte tensor, then 1 MiB of an unknown field (number 99, length-delimited).
    const bytes = infer.requestSerialize({ model_name: "m", inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [Buffer.from(Float32Array.of(2.5).buffer)] });
    const padding = Buffer.alloc(2 ** 20, 7);
    const unknown = Buffer.concat([Buffer.from([0x9a, 0x06, 0x80, 0x80, 0x40]), padding]);
    const own = Buffer.from(new ArrayBuffer(5 + bytes.byteLength + unknown.byteLength));
    own.set(bytes, 5);
    own.set(unknown, 5 + bytes.byteLength);
    const message = infer.requestDeserialize(own.subarray(5)) as InferRequestMessage;
    assert.equal(message[MESSAGE_BUFFER], own.buffer);
    const { body, bytes: counted, transfer } = requestBody(message);
    assert.notEqual(body.parts[0]!.buffer, own.buffer);
    assert.ok(!transfer.includes(own.buffer as ArrayBuffer), "the padded buffer does not move to the worker");
    assert.equal(counted, body.header.byteLength + 4);
    assert.deepEqual(decodeInferenceRequest(body).inputs[0]!.data, Float32Array.of(2.5));
  });

  test("typed contents become pieces of their own", () => {
    const { body, transfer } = requestBody(received({ model_name: "m", inputs: [{ name: "x", datatype: "INT32", shape: [2], contents: { int_contents: [7, -8] } }] }));
    assert.deepEqual(transfer, [body.header.buffer, body.parts[0]!.buffer]);
    assert.deepEqual(decodeInferenceRequest(body).inputs[0]!.data, Int32Array.of(7, -8));
  });

  test("a piece that is not its tensor's binary_data_size is refused", () => {
    const header = new TextEncoder().encode(JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [2], parameters: { binary_data_size: 8 } }] }));
    assert.throws(() => decodeInferenceRequest({ header, parts: [new Uint8Array(4)] }), /binary_data_size is 8 but its binary data is 4 bytes/);
    assert.throws(() => decodeInferenceRequest({ header, parts: [new Uint8Array(8), new Uint8Array(1)] }), /binary data for 1 more tensors/);
  });
});

describe("gRPC answers framed with their outputs appended", () => {
  const service = definition["inference.GRPCInferenceService"] as unknown as Record<string, { responseSerialize: Serialize; responseDeserialize(b: Buffer): any }>;
  const unary = service.ModelInfer!;
  const stream = service.ModelStreamInfer!;
  // Outputs of 0, 1, 127, 128 and 20,000 bytes: lengths of one, two and three varint bytes.
  const raw = [0, 1, 127, 128, 20_000].map((n) => Buffer.from(Uint8Array.from({ length: n }, (_, i) => (i * 31) % 256)));
  const response = {
    model_name: "m",
    model_version: "2",
    id: "r1",
    parameters: { p: { int64_param: "5" } },
    outputs: raw.map((_, i) => ({ name: `o${i}`, datatype: "UINT8", shape: [raw[i]!.byteLength], parameters: {} })),
    raw_output_contents: raw,
  };

  test("a ModelInferResponse reads back as protobuf.js's own serialization of it", () => {
    const frame = inferFrame(response, unary.responseSerialize);
    assert.deepEqual(unary.responseDeserialize(frame.subarray(PREFIX)), unary.responseDeserialize(unary.responseSerialize(response)));
    assert.equal(frame.byteLength - PREFIX, unary.responseSerialize(response).byteLength);
  });

  test("a ModelStreamInferResponse, with an answer or an error, reads back the same", () => {
    for (const message of [{ infer_response: response }, { error_message: "bad request: no" }, { error_message: "", infer_response: { ...response, raw_output_contents: [] } }]) {
      const frame = streamFrame(message, stream.responseSerialize, unary.responseSerialize);
      assert.deepEqual(stream.responseDeserialize(frame.subarray(PREFIX)), stream.responseDeserialize(stream.responseSerialize(message)));
    }
  });
});
