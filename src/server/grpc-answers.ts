/**
 * gzip-compressed gRPC answers. @grpc/grpc-js (1.14) never compresses what a server sends: its
 * call object writes each message with the compressed flag 0. A server interceptor takes the
 * answers of the V2 service's calls that may be compressed (`--grpc-compression`, and a client
 * whose `grpc-accept-encoding` has gzip): it says `grpc-encoding: gzip` in the response headers,
 * serializes each answer and gzips it off the event loop when it is large enough to gain, and
 * hands the call the bytes. To write them with the compressed flag set, the call's own
 * `serializeMessage` (internal to grpc-js) is wrapped on that one call object; where grpc-js is
 * not as expected, nothing is wrapped, the answers go uncompressed, and the server logs it once.
 * A message with the flag 0 is valid under `grpc-encoding: gzip`, so a serialized answer that
 * reached grpc-js's own serializer would still be sent right, uncompressed.
 */
import type { IncomingHttpHeaders } from "node:http2";
import { ResponderBuilder, ServerInterceptingCall, type ServerInterceptingCallInterface, type ServerInterceptor, type ServiceDefinition } from "@grpc/grpc-js";
import type { ServerConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { gzip, MIN_COMPRESSED_BYTES } from "./compression.js";

/** An answer serialized, and gzipped when that made it smaller. */
class Serialized {
  constructor(
    readonly plain: Buffer,
    readonly gzipped: Buffer | undefined,
  ) {}
}

// What @grpc/grpc-js's innermost call object has: the message written into its frame.
type Framing = { serializeMessage: (value: unknown) => Buffer };

/** Which answers are gzipped, and the interceptor that does it. */
export class GrpcCompression {
  readonly #when: ServerConfig["grpcCompression"];
  readonly #log: Logger;
  readonly #prefix: string;
  #arriving: IncomingHttpHeaders | undefined;
  #warned = false;

  /** `service`: the full name of the service whose answers may be compressed. */
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

  /** The service with response serializers that write a {@link Serialized} answer as its plain bytes. */
  service(definition: ServiceDefinition): ServiceDefinition {
    const out: Record<string, unknown> = {};
    for (const [name, method] of Object.entries(definition)) {
      const serialize = method.responseSerialize;
      out[name] = { ...method, responseSerialize: (value: unknown) => (value instanceof Serialized ? value.plain : serialize(value)) };
    }
    return out as ServiceDefinition;
  }

  /** The server interceptor: must come first, so that it is given grpc-js's own call object. */
  readonly interceptor: ServerInterceptor = (method, call) => {
    // grpc-js only needs the call interface back; an uncompressed call goes on unwrapped.
    const unchanged = call as ServerInterceptingCall;
    if (!method.path.startsWith(this.#prefix) || !this.#wanted(this.#arriving)) return unchanged;
    if (!framesSerialized(call)) {
      if (!this.#warned) this.#log.warn({}, "gRPC answers go uncompressed: @grpc/grpc-js's server call is not as this version of shoal expects");
      this.#warned = true;
      return unchanged;
    }
    const responder = new ResponderBuilder()
      .withSendMetadata((metadata, next) => {
        metadata.set("grpc-encoding", "gzip");
        next(metadata);
      })
      .withSendMessage((message, next) => {
        const plain = method.responseSerialize(message);
        if (plain.byteLength < MIN_COMPRESSED_BYTES) return next(new Serialized(plain, undefined));
        // On libuv's thread pool; grpc-js sends a call's next message once this one is written.
        gzip(plain, (err, out) => next(new Serialized(plain, err === null && out.byteLength < plain.byteLength ? out : undefined)));
      })
      .build();
    return new ServerInterceptingCall(call, responder);
  };

  // The client takes gzip, and the server's rule says this call's answers are compressed.
  #wanted(headers: IncomingHttpHeaders | undefined): boolean {
    if (this.#when === "never" || headers === undefined) return false;
    const accepted = String(headers["grpc-accept-encoding"] ?? "").split(",");
    if (!accepted.some((e) => e.trim().toLowerCase() === "gzip")) return false;
    const encoding = String(headers["grpc-encoding"] ?? "identity").trim().toLowerCase();
    return this.#when === "always" || encoding !== "identity";
  }
}

// Wraps the call's serializeMessage so that a Serialized answer is framed as it is, its
// compressed flag set when gzipped; false, and nothing wrapped, when the call has none.
function framesSerialized(call: ServerInterceptingCallInterface): boolean {
  const framing = call as unknown as Partial<Framing>;
  const own = framing.serializeMessage;
  if (typeof own !== "function" || own.length !== 1) return false;
  framing.serializeMessage = function (this: unknown, value: unknown): Buffer {
    if (!(value instanceof Serialized)) return own.call(this, value);
    const bytes = value.gzipped ?? value.plain;
    const frame = Buffer.allocUnsafe(bytes.byteLength + 5);
    frame.writeUInt8(value.gzipped === undefined ? 0 : 1, 0);
    frame.writeUInt32BE(bytes.byteLength, 1);
    frame.set(bytes, 5);
    return frame;
  };
  return true;
}
