import type { ServiceDefinition } from "@grpc/grpc-js";
import { ShoalError } from "../errors.js";
import type { RequestLimits } from "../limits.js";
import { checkInferRequest } from "./check-infer-request.js";
import { PREFIX } from "./message-frames.js";
import { MESSAGE_BUFFER, MESSAGE_BYTES } from "./message-buffer.js";

export { MESSAGE_BUFFER };

/** A request message that is not valid protobuf for its call, or holds more than the limits: answered INVALID_ARGUMENT by the handler. */
export class Undecodable {
  constructor(readonly error: ShoalError) {}
}

/**
 * The service with request decoders that never throw: a message that cannot be read becomes an
 * Undecodable, which the handler answers as a client's error (on a stream, in the stream, which
 * goes on) rather than @grpc/grpc-js ending the call as INTERNAL. A ModelInferRequest is counted
 * before it is decoded (check-infer-request.ts), within `limits`, and carries the size of the
 * bytes it came from as {@link MESSAGE_BYTES}. A decoded message whose buffer was its own
 * carries it as {@link MESSAGE_BUFFER}.
 */
export function tolerant(service: ServiceDefinition, limits: RequestLimits): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(service)) {
    const decode = method.requestDeserialize;
    const what = (method as { requestType?: { type?: { name?: string } } }).requestType?.type?.name ?? `${name} request`;
    const counted = what === "ModelInferRequest";
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        const refused = counted ? checkInferRequest(bytes, limits) : undefined;
        if (refused !== undefined) return new Undecodable(new ShoalError("BAD_REQUEST", refused));
        try {
          const message = decode(bytes);
          if (typeof message !== "object" || message === null) return message;
          if (bytes.buffer.byteLength - bytes.byteLength <= PREFIX) message[MESSAGE_BUFFER] = bytes.buffer;
          if (counted) message[MESSAGE_BYTES] = bytes.byteLength;
          return message;
        } catch (err) {
          return new Undecodable(new ShoalError("BAD_REQUEST", `the message is not a valid ${what}: ${(err as Error).message}`));
        }
      },
    };
  }
  return out as ServiceDefinition;
}
