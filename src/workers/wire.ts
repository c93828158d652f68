/**
 * The frame format of process workers, in one module for both ends: the coordinator
 * (process-channel.ts) and the worker (process-main.ts). `docs/protocol.md` describes it for a
 * worker written in any language, and `test/vectors/protocol.json` holds frames to check an
 * implementation against, byte for byte.
 *
 * A frame is a fixed little-endian header followed by a MessagePack body:
 *
 * | offset | size | field   | meaning                                                     |
 * |--------|------|---------|-------------------------------------------------------------|
 * | 0      | 4    | length  | u32, bytes in the whole frame, header included              |
 * | 4      | 1    | version | u8, {@link PROTOCOL_VERSION}                                |
 * | 5      | 1    | kind    | u8, a {@link KIND} code                                     |
 * | 6      | 2    | flags   | u16, {@link FLAG} bits                                      |
 * | 8      | 4    | seq     | u32, the batch's sequence number (batch, result, stream, flow), else 0 |
 * | 12     | …    | body    | a MessagePack map: the message's fields but `kind` and `seq` |
 */
import { Packr } from "msgpackr";
import type { BatchMessage, BootMessage, FromWorker, ItemResult, ToWorker } from "./messages.js";

/** The protocol version this code speaks, in every frame's header. */
export const PROTOCOL_VERSION = 1;

/** Byte offsets of the header fields. */
export const OFFSET = { length: 0, version: 4, kind: 5, flags: 6, seq: 8 } as const;

/** Sizes of the header fields, in bytes. */
export const SIZE = { length: 4, version: 1, kind: 1, flags: 2, seq: 4 } as const;

/** Bytes before the body. */
export const HEADER_BYTES = 12;

/** The largest frame either end sends or accepts; a larger length means a corrupt stream. */
export const MAX_FRAME_BYTES = 2 ** 30;

/** The environment variable that gives a process worker the path of the coordinator's socket. */
export const SOCKET_ENV = "SHOAL_SOCKET";

/** Every message that travels in a frame. */
export type WireMessage = BootMessage | ToWorker | FromWorker;

/** The message kinds and their codes. Coordinator to worker below 0x80, worker to coordinator from 0x80. */
export const KIND = {
  boot: 0x01,
  batch: 0x02,
  load: 0x03,
  unload: 0x04,
  stop: 0x05,
  flow: 0x06,
  ready: 0x81,
  result: 0x82,
  log: 0x83,
  metrics: 0x84,
  fatal: 0x85,
  loaded: 0x86,
  loadFailed: 0x87,
  stopping: 0x88,
  stream: 0x89,
} as const satisfies Record<WireMessage["kind"], number>;

/** Header flag bits. Senders leave the others 0; receivers ignore them. */
export const FLAG = {
  /** On a result frame: the batch failed as a whole, and the body has `error` instead of `results`. On a stream frame: the stream failed, and the body has `error`. */
  ERROR: 0x0001,
} as const;

const KIND_BY_CODE = new Map<number, WireMessage["kind"]>(Object.entries(KIND).map(([kind, code]) => [code, kind as WireMessage["kind"]]));

const LOG_LEVELS: readonly unknown[] = ["debug", "info", "warn", "error"];
const FLOW_ACTIONS: readonly unknown[] = ["cancel", "pause", "resume"];

/** A frame that breaks the protocol. The connection cannot be trusted after it. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

// Plain MessagePack that any language reads: no records (`useRecords: false`), maps in their
// shortest form as most encoders write them (`variableMapSize`), decoded to objects.
// `moreTypes` keeps typed arrays typed (extension 0x74) instead of flattening them to bytes.
// `copyBuffers` gives every decoded byte array a buffer of its own, so a value passed on to a
// thread stage moves alone instead of cloning the frame it came in. 64-bit integers decode to
// numbers when they fit, so a peer's large integers do not turn into BigInts (msgpackr
// documents "auto" but leaves it out of its types).
const packr = new Packr({ useRecords: false, variableMapSize: true, moreTypes: true, mapsAsObjects: true, copyBuffers: true, int64AsType: "auto" as "bigint" });

/** Encodes a message as one frame. Throws if a value cannot be carried (a cycle, say) or the frame is too large. */
export function encodeFrame(message: WireMessage): Buffer {
  const body = packr.pack(bodyOf(message));
  const length = HEADER_BYTES + body.byteLength;
  if (length > MAX_FRAME_BYTES) throw new RangeError(`a ${message.kind} frame of ${length} bytes is over the limit of ${MAX_FRAME_BYTES}`);
  const frame = Buffer.allocUnsafe(length);
  frame.writeUInt32LE(length, OFFSET.length);
  frame.writeUInt8(PROTOCOL_VERSION, OFFSET.version);
  frame.writeUInt8(KIND[message.kind], OFFSET.kind);
  frame.writeUInt16LE((message.kind === "result" || message.kind === "stream") && message.error !== undefined ? FLAG.ERROR : 0, OFFSET.flags);
  // Sequence numbers wrap at 2^32 on the wire; a worker holds far fewer batches than that.
  frame.writeUInt32LE("seq" in message ? message.seq >>> 0 : 0, OFFSET.seq);
  frame.set(body, HEADER_BYTES);
  return frame;
}

// The body map: every field but kind and seq. Fields are copied by name, not listed, so that a
// field added to messages.ts travels without a change here.
function bodyOf(message: WireMessage): Record<string, unknown> {
  const body = fieldsOf(message, HEADER_FIELDS);
  if (message.kind === "batch") body.items = message.items.map((item) => ({ ...item, payload: asBin(item.payload) }));
  if (message.kind === "stream" && message.chunk !== undefined) body.chunk = asBin(message.chunk);
  if (message.kind === "result" && message.results !== undefined) {
    body.results = message.results.map((r) => (r.ok ? { ...fieldsOf(r, THREAD_ONLY), value: asBin(r.value) } : r));
  }
  return body;
}

const HEADER_FIELDS = ["kind", "seq"];
// Transfer lists only matter between threads.
const THREAD_ONLY = ["transfer"];

// The fields of `value` but `skip`, leaving out undefined ones (msgpackr would write them as an
// extension other languages do not know).
function fieldsOf(value: object, skip: readonly string[]): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (field !== undefined && !skip.includes(key)) fields[key] = field;
  }
  return fields;
}

// Request and response bytes travel as msgpack bin. msgpackr writes a Buffer as bin, while
// `moreTypes` would write a plain Uint8Array as a typed array, so a payload or value that is a
// Uint8Array is re-viewed (not copied) as a Buffer.
function asBin(value: unknown): unknown {
  return value instanceof Uint8Array && !Buffer.isBuffer(value) ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value;
}

/** Decodes one whole frame. Throws a {@link ProtocolError} if it breaks the protocol. */
export function decodeFrame(frame: Uint8Array): WireMessage {
  if (frame.byteLength < HEADER_BYTES) throw new ProtocolError(`a frame of ${frame.byteLength} bytes is shorter than its header`);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const length = view.getUint32(OFFSET.length, true);
  if (length !== frame.byteLength) throw new ProtocolError(`the frame's length field says ${length} bytes, but it has ${frame.byteLength}`);
  const version = view.getUint8(OFFSET.version);
  if (version !== PROTOCOL_VERSION) throw new ProtocolError(`protocol version ${version}; this end speaks version ${PROTOCOL_VERSION}`);
  const code = view.getUint8(OFFSET.kind);
  const kind = KIND_BY_CODE.get(code);
  if (kind === undefined) throw new ProtocolError(`unknown message kind 0x${code.toString(16).padStart(2, "0")}`);
  const flags = view.getUint16(OFFSET.flags, true);
  const seq = view.getUint32(OFFSET.seq, true);
  let body: unknown;
  try {
    // A plain Uint8Array view, so that decoded byte arrays are Uint8Arrays and not Buffers.
    body = packr.unpack(new Uint8Array(frame.buffer, frame.byteOffset + HEADER_BYTES, length - HEADER_BYTES));
  } catch (err) {
    throw new ProtocolError(`the body of a ${kind} frame is not MessagePack: ${(err as Error).message}`);
  }
  return toMessage(kind, flags, seq, mapOf(body, `the body of a ${kind} frame`));
}

// Checks the fields each end relies on; the others pass through as they are.
function toMessage(kind: WireMessage["kind"], flags: number, seq: number, fields: Record<string, unknown>): WireMessage {
  const where = `${kind} frame`;
  switch (kind) {
    case "boot":
      // A model host's boot holds only what every worker is told.
      if (fields.host === true) expect(fields, where, { workerId: "number", num: "number" });
      else expect(fields, where, { moduleUrl: "string", stageIndex: "number", stageName: "string", className: "string", workerId: "number", maxBatchSize: "number" });
      return { ...fields, kind } as BootMessage;
    case "batch":
      for (const item of listOf(fields.items, `${where}: items`)) expect(mapOf(item, `${where}: an item`), `${where}: an item`, { ingress: "boolean", egress: "boolean", meta: "object" });
      return { ...fields, kind, seq } as BatchMessage;
    case "ready":
      expect(fields, where, { contentType: "string" });
      return { ...fields, kind } as FromWorker;
    case "result":
      if ((flags & FLAG.ERROR) !== 0) {
        checkError(fields.error, `${where}: error`);
        return { kind, seq, error: fields.error } as FromWorker;
      }
      for (const result of listOf(fields.results, `${where}: results`)) checkResult(mapOf(result, `${where}: a result`), `${where}: a result`);
      if (fields.retries === undefined) return { kind, seq, results: fields.results as ItemResult[] };
      if (!Number.isSafeInteger(fields.retries) || (fields.retries as number) < 0) throw new ProtocolError(`${where}: 'retries' must be a count`);
      return { kind, seq, results: fields.results as ItemResult[], retries: fields.retries as number };
    case "stream":
      expect(fields, where, { index: "number" });
      if (fields.chunk !== undefined && !(fields.chunk instanceof Uint8Array)) throw new ProtocolError(`${where}: 'chunk' must be bin`);
      if (fields.end !== undefined && fields.end !== true) throw new ProtocolError(`${where}: 'end' must be true when present`);
      if ((flags & FLAG.ERROR) !== 0) checkError(fields.error, `${where}: error`);
      return { ...fields, kind, seq } as FromWorker;
    case "flow":
      expect(fields, where, { index: "number" });
      if (!FLOW_ACTIONS.includes(fields.action)) throw new ProtocolError(`${where}: action must be one of ${FLOW_ACTIONS.join(", ")}`);
      return { ...fields, kind, seq } as ToWorker;
    case "log":
      if (!LOG_LEVELS.includes(fields.level)) throw new ProtocolError(`${where}: level must be one of ${LOG_LEVELS.join(", ")}`);
      expect(fields, where, { msg: "string" });
      return { ...fields, kind } as FromWorker;
    case "metrics":
      listOf(fields.metrics, `${where}: metrics`);
      return { ...fields, kind } as FromWorker;
    case "fatal":
      checkError(fields.error, `${where}: error`);
      return { ...fields, kind } as FromWorker;
    case "load":
      expect(fields, where, { model: "string", name: "string", version: "string", runtime: "string", dir: "string", maxBatchSize: "number", workers: "number", parameters: "object" });
      return { ...fields, kind } as ToWorker;
    case "unload":
      expect(fields, where, { model: "string" });
      return { ...fields, kind } as ToWorker;
    case "loaded":
      expect(fields, where, { model: "string", platform: "string" });
      listOf(fields.inputs, `${where}: inputs`);
      listOf(fields.outputs, `${where}: outputs`);
      return { ...fields, kind } as FromWorker;
    case "loadFailed":
      expect(fields, where, { model: "string" });
      checkError(fields.error, `${where}: error`);
      return { ...fields, kind } as FromWorker;
    case "stop":
    case "stopping":
      return { kind };
  }
}

function checkResult(result: Record<string, unknown>, where: string): void {
  expect(result, where, { ok: "boolean" });
  if (result.ok === false) checkError(result.error, `${where}: error`);
  // A fanned-out item's value is the list of its sub-items' values.
  if (result.fanOut !== undefined && (result.fanOut !== true || !Array.isArray(result.value))) throw new ProtocolError(`${where}: 'fanOut' must be true, with an array 'value'`);
}

// Errors carry a code of the error table and a message (see WireError in errors.ts).
function checkError(error: unknown, where: string): void {
  const fields = mapOf(error, where);
  expect(fields, where, { code: "string", message: "string" });
  if (fields.stack !== undefined && typeof fields.stack !== "string") throw new ProtocolError(`${where}: stack must be a string`);
  if (fields.status !== undefined && !Number.isInteger(fields.status)) throw new ProtocolError(`${where}: status must be a whole number`);
}

function expect(fields: Record<string, unknown>, where: string, types: Record<string, "string" | "number" | "boolean" | "object">): void {
  for (const [key, type] of Object.entries(types)) {
    const value = fields[key];
    if (typeof value !== type || value === null) throw new ProtocolError(`${where}: '${key}' must be a ${type === "object" ? "map" : type}`);
  }
}

function mapOf(value: unknown, where: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value) || ArrayBuffer.isView(value)) throw new ProtocolError(`${where} must be a map`);
  return value as Record<string, unknown>;
}

function listOf(value: unknown, where: string): unknown[] {
  if (!Array.isArray(value)) throw new ProtocolError(`${where} must be an array`);
  return value;
}

/**
 * Cuts a byte stream into frames and decodes them. Chunks are kept in a list and each frame's
 * bytes are copied at most once (not at all when a frame lies within one chunk), so a frame
 * split over many chunks costs time in proportion to its size.
 */
export class FrameDecoder {
  readonly #chunks: Uint8Array[] = [];
  /** Where the unread bytes start in the first chunk. */
  #offset = 0;
  /** Unread bytes in all chunks. */
  #buffered = 0;
  /** The length of the frame being received, 0 until its length field has arrived. */
  #length = 0;

  /** Takes the next bytes of the stream; returns the messages of the frames they complete. */
  push(chunk: Uint8Array): WireMessage[] {
    if (chunk.byteLength > 0) {
      this.#chunks.push(chunk);
      this.#buffered += chunk.byteLength;
    }
    const messages: WireMessage[] = [];
    for (;;) {
      if (this.#length === 0) {
        if (this.#buffered < SIZE.length) break;
        const length = this.#peekLength();
        if (length < HEADER_BYTES || length > MAX_FRAME_BYTES) throw new ProtocolError(`a frame length of ${length} bytes is not between ${HEADER_BYTES} and ${MAX_FRAME_BYTES}`);
        this.#length = length;
      }
      if (this.#buffered < this.#length) break;
      const frame = this.#take(this.#length);
      this.#length = 0;
      messages.push(decodeFrame(frame));
    }
    return messages;
  }

  // The u32 at the read position, which may straddle chunks.
  #peekLength(): number {
    let value = 0;
    let chunk = 0;
    let at = this.#offset;
    for (let i = 0; i < SIZE.length; i++) {
      while (at >= this.#chunks[chunk]!.byteLength) {
        chunk++;
        at = 0;
      }
      value += this.#chunks[chunk]![at++]! * 2 ** (8 * i);
    }
    return value;
  }

  // The next `length` bytes: a view when the first chunk holds them all, else one copy.
  #take(length: number): Uint8Array {
    const first = this.#chunks[0]!;
    this.#buffered -= length;
    if (first.byteLength - this.#offset >= length) {
      const frame = first.subarray(this.#offset, this.#offset + length);
      this.#offset += length;
      if (this.#offset === first.byteLength) {
        this.#chunks.shift();
        this.#offset = 0;
      }
      return frame;
    }
    const frame = new Uint8Array(Buffer.allocUnsafeSlow(length).buffer, 0, length);
    let filled = 0;
    let used = 0;
    while (filled < length) {
      const chunk = this.#chunks[used]!;
      const part = Math.min(chunk.byteLength - this.#offset, length - filled);
      frame.set(chunk.subarray(this.#offset, this.#offset + part), filled);
      filled += part;
      this.#offset += part;
      if (this.#offset === chunk.byteLength) {
        used++;
        this.#offset = 0;
      }
    }
    // One splice per frame, not one shift per chunk.
    this.#chunks.splice(0, used);
    return frame;
  }
}
