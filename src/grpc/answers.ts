/**
 * How the V2 service's answers are written: framed with their outputs' bytes copied once, and gzip-compressed for the calls `--grpc-compression` picks from clients
 * whose `grpc-accept-encoding` has gzip. @grpc/grpc-js (1.14) serializes each message itself,
 * copies it into a frame, and never compresses a server's: its call object writes the compressed
 * flag 0. A server interceptor wraps that call object's own `serializeMessage` (internal to
 * grpc-js) on each call of the service, so that it frames the answer Shoal's way; a call whose
 * answers are compressed it also wraps in an intercepting call, which says `grpc-encoding: gzip`
 * in the response headers and gzips each answer off the event loop, when large enough to gain,
 * before the call object sends it. Where grpc-js is not as expected, nothing is wrapped, grpc-js
 * writes the answers its own way (uncompressed), and the server logs it once. A framed answer
 * that reached grpc-js's own serializer would still be sent right, uncompressed: the service's
 * serializers take one as its message's bytes, and a message with the flag 0 is valid under any
 * `grpc-encoding`.
 */
import type { IncomingHttpHeaders } from "node:http2";
import { ResponderBuilder, ServerInterceptingCall, type ServerInterceptingCallInterface, type ServerInterceptor, type ServiceDefinition } from "@grpc/grpc-js";
import type { ServerConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { gzip, MIN_COMPRESSED_BYTES } from "../serving/gzip.js";
import { PREFIX } from "./message-frames.js";
import type { InferResponseMessage } from "./messages.js";

/** An answer in its frame, and its message gzipped when that was wanted and made it smaller. */
class Framed {
  constructor(
    readonly frame: Buffer,
    readonly gzipped: Buffer | undefined,
  ) {}
}

// What @grpc/grpc-js's innermost call object has: the message written into its frame.
type Framing = { serializeMessage: (value: unknown) => Buffer };

/** The V2 service's answers: their frames, which are gzipped, and the interceptor that writes them. */
export class GrpcAnswers {
  readonly #when: ServerConfig["grpcCompression"];
  readonly #log: Logger;
  readonly #prefix: string;
  // The inference answers' own serializers, for frames that copy outputs once.
  #infer: Serialize | undefined;
  #stream: Serialize | undefined;
  #arriving: IncomingHttpHeaders | undefined;
  #warned = false;

  /** `service`: the full name of the service whose answers are written here. */
  constructor(when: ServerConfig["grpcCompression"], service: string, logger: Logger) {
    this.#when = when;
    this.#prefix = `/${service}/`;
    this.#log = logger;
  }

  /**
   * Lets the interceptor see a call's request headers, which grpc-js keeps from its handlers (it
   * strips the encoding ones from the metadata): they are noted when a stream opens, before
   * grpc-js's own listener makes the call (and runs the interceptors), and forgotten after it.
   */
  watch(listener: { prependListener(event: "stream", fn: (stream: unknown, headers: IncomingHttpHeaders) => void): unknown; on(event: "stream", fn: () => void): unknown }): void {
    listener.prependListener("stream", (_stream, headers) => (this.#arriving = headers));
    listener.on("stream", () => (this.#arriving = undefined));
  }

  /** The service with response serializers that take a framed answer as its message's bytes. */
  service(definition: ServiceDefinition): ServiceDefinition {
    this.#infer = definition.ModelInfer?.responseSerialize;
    this.#stream = definition.ModelStreamInfer?.responseSerialize;
    const out: Record<string, unknown> = {};
    for (const [name, method] of Object.entries(definition)) {
      const serialize = method.responseSerialize;
      out[name] = { ...method, responseSerialize: (value: unknown) => (value instanceof Framed ? value.frame.subarray(PREFIX) : serialize(value)) };
    }
    return out as ServiceDefinition;
  }

  /**
   * The server interceptor: must be given grpc-js's own call object (first, or after interceptors that return it as it is). Each
   * call of the service has its answers framed by that object's wrapped serializer; a call whose
   * answers are compressed is wrapped too, to gzip them before they reach it.
   */
  readonly interceptor: ServerInterceptor = (method, call) => {
    // grpc-js only needs the call interface back; a call not compressed goes on unwrapped.
    const unchanged = call as ServerInterceptingCall;
    if (!method.path.startsWith(this.#prefix)) return unchanged;
    const name = method.path.slice(this.#prefix.length);
    if (!framesAnswers(call, (message) => this.#frame(name, message, method.responseSerialize))) {
      if (!this.#warned) this.#log.warn({}, "gRPC answers go uncompressed, serialized by @grpc/grpc-js: its server call is not as this version of shoal expects");
      this.#warned = true;
      return unchanged;
    }
    if (!this.#wanted(this.#arriving)) return unchanged;
    const responder = new ResponderBuilder()
      .withSendMetadata((metadata, next) => {
        metadata.set("grpc-encoding", "gzip");
        next(metadata);
      })
      .withSendMessage((message, next) => {
        let frame: Buffer;
        try {
          frame = this.#frame(name, message, method.responseSerialize);
        } catch {
          // The call's serializer meets the same error, and answers INTERNAL.
          return next(message);
        }
        const plain = frame.subarray(PREFIX);
        if (plain.byteLength < MIN_COMPRESSED_BYTES) return next(new Framed(frame, undefined));
        // On libuv's thread pool; grpc-js sends a call's next message once this one is written.
        gzip(plain, (err, out) => next(new Framed(frame, err === null && out.byteLength < plain.byteLength ? out : undefined)));
      })
      .build();
    return new ServerInterceptingCall(call, responder);
  };

  #frame(name: string, message: unknown, serialize: Serialize): Buffer {
    if (name === "ModelInfer" && this.#infer !== undefined) return inferFrame(message as Parameters<typeof inferFrame>[0], this.#infer);
    if (name === "ModelStreamInfer" && this.#stream !== undefined && this.#infer !== undefined) return streamFrame(message as Parameters<typeof streamFrame>[0], this.#stream, this.#infer);
    return frameOf(message, serialize);
  }

  // The client takes gzip, and the server's rule says this call's answers are compressed.
  #wanted(headers: IncomingHttpHeaders | undefined): boolean {
    if (this.#when === "never" || headers === undefined) return false;
    const accepted = String(headers["grpc-accept-encoding"] ?? "").split(",");
    if (!accepted.some((e) => e.trim().toLowerCase() === "gzip")) return false;
    const encoding = String(headers["grpc-encoding"] ?? "identity").trim().toLowerCase();
    return this.#when === "always" || encoding !== "identity";
  }
}

// Wraps the call's serializeMessage so that it frames each answer with `frame` (a Framed one, as
// it is), and fills the frame's prefix, the compressed flag set when gzipped; false, and nothing
// wrapped, when the call has none.
function framesAnswers(call: ServerInterceptingCallInterface, frame: (message: unknown) => Buffer): boolean {
  const framing = call as unknown as Partial<Framing>;
  const own = framing.serializeMessage;
  if (typeof own !== "function" || own.length !== 1) return false;
  framing.serializeMessage = (value: unknown): Buffer => {
    let out: Buffer;
    if (!(value instanceof Framed)) out = frame(value);
    else if (value.gzipped === undefined) out = value.frame;
    else {
      out = Buffer.allocUnsafe(PREFIX + value.gzipped.byteLength);
      out.set(value.gzipped, PREFIX);
    }
    out.writeUInt8(value instanceof Framed && value.gzipped !== undefined ? 1 : 0, 0);
    out.writeUInt32BE(out.byteLength - PREFIX, 1);
    return out;
  };
  return true;
}

// The answers' frames, their outputs' bytes copied once: protobuf.js would copy an answer's
// `raw_output_contents` into its buffer, and @grpc/grpc-js that buffer into its frame; here the
// answer is serialized without them, and they are appended to it as fields of their own (protobuf
// reads a message's fields in any order), straight into the frame. A frame leaves its first
// PREFIX bytes (compressed flag and length) for the sender to fill.
/** A message's serializer, as a method definition has it. */
export type Serialize = (value: unknown) => Buffer;


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
 * {@link inferFrame} writes one; a `bare` one is that ModelInferResponse alone, as MLServer's
 * ModelStreamInfer answers. `serialize` is the stream message's serializer, `serializeInfer`
 * the ModelInferResponse's.
 */
export function streamFrame(message: { error_message?: string; infer_response?: InferResponseMessage | null; bare?: boolean }, serialize: Serialize, serializeInfer: Serialize): Buffer {
  const response = message.infer_response;
  if (response == null) return frameOf(message, serialize);
  if (message.bare === true) return inferFrame(response, serializeInfer);
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
