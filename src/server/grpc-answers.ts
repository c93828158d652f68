/**
 * How the V2 service's answers are written: framed with their outputs' bytes copied once
 * (grpc-frames.ts), and gzip-compressed for the calls `--grpc-compression` picks from clients
 * whose `grpc-accept-encoding` has gzip. @grpc/grpc-js (1.14) serializes each message itself,
 * copies it into a frame, and never compresses a server's: its call object writes the compressed
 * flag 0. A server interceptor takes each answer of the service instead: it frames it, gzips it
 * off the event loop when compression is wanted and it is large enough to gain, and hands the
 * call the frame, after `grpc-encoding: gzip` in the response headers when compressing. To send
 * that frame as it is, the call's own `serializeMessage` (internal to grpc-js) is wrapped on that
 * one call object; where grpc-js is not as expected, nothing is wrapped, grpc-js writes the
 * answers its own way (uncompressed), and the server logs it once. A frame that reached grpc-js's
 * own serializer would still be sent right, uncompressed: the service's serializers take one as
 * its message's bytes, and a message with the flag 0 is valid under any `grpc-encoding`.
 */
import type { IncomingHttpHeaders } from "node:http2";
import { ResponderBuilder, ServerInterceptingCall, type ServerInterceptingCallInterface, type ServerInterceptor, type ServiceDefinition } from "@grpc/grpc-js";
import type { ServerConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { gzip, MIN_COMPRESSED_BYTES } from "./compression.js";
import { frameOf, inferFrame, PREFIX, streamFrame, type Serialize } from "./grpc-frames.js";

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

  /** The server interceptor: must come first, so that it is given grpc-js's own call object. */
  readonly interceptor: ServerInterceptor = (method, call) => {
    // grpc-js only needs the call interface back; a call of another service goes on unwrapped.
    const unchanged = call as ServerInterceptingCall;
    if (!method.path.startsWith(this.#prefix)) return unchanged;
    if (!framesAsGiven(call)) {
      if (!this.#warned) this.#log.warn({}, "gRPC answers go uncompressed, serialized by @grpc/grpc-js: its server call is not as this version of shoal expects");
      this.#warned = true;
      return unchanged;
    }
    const compress = this.#wanted(this.#arriving);
    const name = method.path.slice(this.#prefix.length);
    const responder = new ResponderBuilder()
      .withSendMetadata((metadata, next) => {
        if (compress) metadata.set("grpc-encoding", "gzip");
        next(metadata);
      })
      .withSendMessage((message, next) => {
        let frame: Buffer;
        try {
          frame = this.#frame(name, message, method.responseSerialize);
        } catch {
          // grpc-js serializes it itself, and answers INTERNAL if it cannot.
          return next(message);
        }
        if (!compress || frame.byteLength - PREFIX < MIN_COMPRESSED_BYTES) return next(new Framed(frame, undefined));
        // On libuv's thread pool; grpc-js sends a call's next message once this one is written.
        const plain = frame.subarray(PREFIX);
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

// Wraps the call's serializeMessage so that a Framed answer is sent as it is, its prefix filled
// (the compressed flag set when gzipped); false, and nothing wrapped, when the call has none.
function framesAsGiven(call: ServerInterceptingCallInterface): boolean {
  const framing = call as unknown as Partial<Framing>;
  const own = framing.serializeMessage;
  if (typeof own !== "function" || own.length !== 1) return false;
  framing.serializeMessage = function (this: unknown, value: unknown): Buffer {
    if (!(value instanceof Framed)) return own.call(this, value);
    let frame = value.frame;
    if (value.gzipped !== undefined) {
      frame = Buffer.allocUnsafe(PREFIX + value.gzipped.byteLength);
      frame.set(value.gzipped, PREFIX);
    }
    frame.writeUInt8(value.gzipped === undefined ? 0 : 1, 0);
    frame.writeUInt32BE(frame.byteLength - PREFIX, 1);
    return frame;
  };
  return true;
}
