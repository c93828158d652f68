import type { ServiceDefinition } from "@grpc/grpc-js";
import { ShoalError } from "../errors.js";
import { PREFIX } from "./frames.js";
import { MESSAGE_BUFFER } from "./message-buffer.js";

export { MESSAGE_BUFFER };

/** A request message that is not valid protobuf for its call: answered INVALID_ARGUMENT by the handler. */
export class Undecodable {
  readonly error: ShoalError;

  constructor(what: string, why: string) {
    this.error = new ShoalError("BAD_REQUEST", `the message is not a valid ${what}: ${why}`);
  }
}


/**
 * The service with request decoders that never throw: a message that cannot be read becomes an
 * Undecodable, which the handler answers as a client's error (on a stream, in the stream, which
 * goes on) rather than @grpc/grpc-js ending the call as INTERNAL. A decoded message whose buffer
 * was its own carries it as {@link MESSAGE_BUFFER}.
 */
export function tolerant(service: ServiceDefinition): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(service)) {
    const decode = method.requestDeserialize;
    const what = (method as { requestType?: { type?: { name?: string } } }).requestType?.type?.name ?? `${name} request`;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          const message = decode(bytes);
          if (bytes.buffer.byteLength - bytes.byteLength <= PREFIX && typeof message === "object" && message !== null) message[MESSAGE_BUFFER] = bytes.buffer;
          return message;
        } catch (err) {
          return new Undecodable(what, (err as Error).message);
        }
      },
    };
  }
  return out as ServiceDefinition;
}
