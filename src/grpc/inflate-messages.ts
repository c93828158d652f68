import { status, type ServerInterceptingCall, type ServerInterceptor } from "@grpc/grpc-js";
import { inflate } from "../serving/inflate.js";
import { PREFIX } from "./message-frames.js";

// What @grpc/grpc-js's innermost call object has (1.14, internal): the encoding the call's
// messages came in, and the method that turns a message's frame into its bytes.
type Inflating = {
  incomingEncoding: string;
  decompressMessage: (frame: Buffer, encoding: string) => Buffer | Promise<Buffer>;
};

/**
 * The server interceptor that inflates a call's compressed messages (`grpc-encoding` gzip or
 * deflate) as REST bodies are (serving/inflate.ts), within `limit` bytes (`--max-request-size`,
 * which grpc-js is given as its message limit too). grpc-js inflates a message 16 KiB a step, a
 * turn of the event loop each, and tests the limit only after every step: each small message
 * that inflates to the limit cost the event loop 64 turns. It must be given grpc-js's own call
 * object (the first interceptor, or after ones that return it as it is); it returns that call as
 * it is, and leaves grpc-js's way in place for a call that is not compressed, an encoding it does
 * not take, or a grpc-js whose call object is not as expected. Its errors are grpc-js's own.
 */
export function inflateMessages(limit: number): ServerInterceptor {
  return (_method, call) => {
    const own = call as unknown as Partial<Inflating>;
    const encoding = own.incomingEncoding;
    const decompress = own.decompressMessage;
    if ((encoding === "gzip" || encoding === "deflate") && typeof decompress === "function" && decompress.length === 2) {
      own.decompressMessage = (frame, used) => (used === encoding ? inflated(frame.subarray(PREFIX), encoding, limit) : decompress.call(call, frame, used));
    }
    return call as ServerInterceptingCall;
  };
}

// A message's bytes inflated, or the status grpc-js answers when they cannot be.
function inflated(bytes: Buffer, encoding: string, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    inflate(encoding, bytes, limit, (out, failure) => {
      if (out !== undefined) resolve(out);
      else if (failure?.tooLarge !== false) reject({ code: status.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${limit}` });
      else reject({ code: status.INTERNAL, details: "Failed to decompress message" });
    }),
  );
}
