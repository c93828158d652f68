/**
 * The V2 service's answers as gRPC frames, their outputs' bytes copied once. protobuf.js would
 * copy an answer's `raw_output_contents` into its buffer, and @grpc/grpc-js that buffer into its
 * frame; here the answer is serialized without them, and they are appended to it as fields of
 * their own (protobuf reads a message's fields in any order), straight into the frame. A frame
 * leaves its first {@link PREFIX} bytes (compressed flag and length) for the sender to fill.
 */
import type { InferResponseMessage } from "./messages.js";

/** A message's serializer, as a method definition has it. */
export type Serialize = (value: unknown) => Buffer;

/** The bytes before a message in its gRPC frame: the compressed flag, then the length. */
export const PREFIX = 5;

// Tags of length-delimited fields: ModelInferResponse.raw_output_contents (6) and
// ModelStreamInferResponse.infer_response (2).
const RAW_OUTPUT_CONTENTS = (6 << 3) | 2;
const INFER_RESPONSE = (2 << 3) | 2;

/** A message serialized by `serialize`, in a frame. */
export function frameOf(message: unknown, serialize: Serialize): Buffer {
  const bytes = serialize(message);
  const frame = Buffer.allocUnsafe(PREFIX + bytes.byteLength);
  frame.set(bytes, PREFIX);
  return frame;
}

/** A ModelInferResponse in a frame; `serialize` is its message's serializer. */
export function inferFrame(response: InferResponseMessage, serialize: Serialize): Buffer {
  const head = serialize({ ...response, raw_output_contents: [] });
  const raw = response.raw_output_contents;
  const frame = Buffer.allocUnsafe(PREFIX + head.byteLength + fieldsLength(raw));
  frame.set(head, PREFIX);
  writeFields(frame, PREFIX + head.byteLength, raw);
  return frame;
}

/**
 * A ModelStreamInferResponse in a frame: its `infer_response`, if any, written as
 * {@link inferFrame} writes one. `serialize` is the stream message's serializer, `serializeInfer`
 * the ModelInferResponse's.
 */
export function streamFrame(message: { error_message?: string; infer_response?: InferResponseMessage | null }, serialize: Serialize, serializeInfer: Serialize): Buffer {
  const response = message.infer_response;
  if (response == null) return frameOf(message, serialize);
  const head = serialize({ ...message, infer_response: null });
  const inner = serializeInfer({ ...response, raw_output_contents: [] });
  const raw = response.raw_output_contents;
  const innerLength = inner.byteLength + fieldsLength(raw);
  const frame = Buffer.allocUnsafe(PREFIX + head.byteLength + 1 + varintLength(innerLength) + innerLength);
  frame.set(head, PREFIX);
  let at = PREFIX + head.byteLength;
  frame[at++] = INFER_RESPONSE;
  at = writeVarint(frame, at, innerLength);
  frame.set(inner, at);
  writeFields(frame, at + inner.byteLength, raw);
  return frame;
}

function fieldsLength(raw: readonly Uint8Array[]): number {
  let length = 0;
  for (const bytes of raw) length += 1 + varintLength(bytes.byteLength) + bytes.byteLength;
  return length;
}

function writeFields(frame: Buffer, at: number, raw: readonly Uint8Array[]): void {
  for (const bytes of raw) {
    frame[at++] = RAW_OUTPUT_CONTENTS;
    at = writeVarint(frame, at, bytes.byteLength);
    frame.set(bytes, at);
    at += bytes.byteLength;
  }
}

function varintLength(n: number): number {
  let length = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) length++;
  return length;
}

function writeVarint(frame: Buffer, at: number, n: number): number {
  let v = n;
  while (v >= 0x80) {
    frame[at++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  frame[at++] = v;
  return at;
}
