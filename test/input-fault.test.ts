/**
 * Which of ONNX Runtime's failures are the client's (src/onnx/input-fault.ts), on the messages
 * onnxruntime-node 1.30 gives: a 400 that names the inputs and says what the runtime found, with
 * no source paths, C++ names or addresses; anything else stays the server's.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ClientError } from "../src/errors.js";
import { inputFault, runtimeVerdict } from "../src/onnx/input-fault.js";
import type { TensorValue } from "../src/tensor/tensor.js";

const ids: Record<string, TensorValue> = { ids: { type: "int64", shape: [1, 1], data: BigInt64Array.of(99n) } };
const vad: Record<string, TensorValue> = {
  input: { type: "float32", shape: [1, 100], data: new Float32Array(100) },
  sr: { type: "int64", shape: [], data: BigInt64Array.of(16000n) },
};

test("an operator that refuses a request's values is the client's 400, naming the input", () => {
  const error = inputFault(new Error("Non-zero status code returned while running Gather node. Name:'lookup' Status Message: indices element out of data bounds, idx=99 must be within the inclusive range [-10,9]"), ids);
  assert.ok(error instanceof ClientError);
  assert.equal(error.status, 400);
  assert.equal(error.publicMessage, "bad request: the model cannot run on input 'ids' (int64 [1, 1]): Gather node 'lookup': indices element out of data bounds, idx=99 must be within the inclusive range [-10,9]");
});

test("a node inside a subgraph is named by the innermost one; several inputs are listed with their shapes", () => {
  const message = "Non-zero status code returned while running If node. Name:'If_25' Status Message: Non-zero status code returned while running Conv node. Name:'Conv_132' Status Message: Invalid input shape: {1}";
  assert.equal(inputFault(new Error(message), vad)?.message, "the model cannot run on inputs 'input' (float32 [1, 100]), 'sr' (int64 []): Conv node 'Conv_132': Invalid input shape: {1}");
});

test("the runtime's source location, C++ signature, failed condition and addresses are left out", () => {
  const message =
    "Non-zero status code returned while running Reshape node. Name:'rs' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:84 onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, onnxruntime::TensorShapeVector&, bool) size != 0 && (input_shape_size % size) == 0 was false. The input tensor cannot be reshaped to the requested shape. Input shape:{1,5}, requested shape:{-1,3}\n";
  assert.equal(runtimeVerdict(message), "Reshape node 'rs': The input tensor cannot be reshaped to the requested shape. Input shape:{1,5}, requested shape:{-1,3}");
  assert.equal(runtimeVerdict("Non-zero status code returned while running Add node. Name:'a' Status Message: buffer at 0x7ffd5e2a1c40 is\n  misaligned"), "Add node 'a': buffer at is misaligned");
  const long = runtimeVerdict(`Non-zero status code returned while running Add node. Name:'a' Status Message: ${"x".repeat(1000)}`)!;
  assert.equal(long.length, 400);
  assert.ok(long.endsWith("…"));
});

test("the runtime's own checks of the inputs are the client's, without the advice meant for the model's author", () => {
  const message = "Got invalid dimensions for input: ids for the following indices\n index: 1 Got: 2 Expected: 1\n Please fix either the inputs/outputs or the model.";
  assert.equal(inputFault(new Error(message), ids)?.message, "the model cannot run on input 'ids' (int64 [1, 1]): Got invalid dimensions for input: ids for the following indices index: 1 Got: 2 Expected: 1");
  assert.ok(inputFault(new Error("Invalid rank for input: ids Got: 3 Expected: 2 Please fix either the inputs/outputs or the model."), ids));
  assert.ok(inputFault(new Error("Unexpected input data type. Actual: (tensor(float)) , expected: (tensor(int64))"), ids));
});

test("running out of memory, other runtime errors and bugs stay the server's", () => {
  const oom =
    "Non-zero status code returned while running MatMul node. Name:'mm0' Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Failed to allocate memory for requested buffer of size 4294967296\n";
  assert.equal(inputFault(new Error(oom), ids), undefined);
  assert.equal(inputFault(new Error("Non-zero status code returned while running Mul node. Name:'m' Status Message: std::bad_alloc"), ids), undefined);
  assert.equal(inputFault(new Error("input 'ids' is missing in 'feeds'."), ids), undefined);
  assert.equal(inputFault(new Error("Session already disposed."), ids), undefined);
  assert.equal(inputFault(new TypeError("Cannot read properties of undefined (reading 'dims')"), ids), undefined);
  assert.equal(inputFault("Non-zero status code returned while running Gather node. Name:'g' Status Message: idx=99", ids), undefined);
});
