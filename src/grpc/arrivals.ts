import { constants, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Hold } from "../serving/byte-budget.js";
import { PREFIX } from "./frames.js";

/**
 * Where the messages of one gRPC request stream end: each is a {@link PREFIX}-byte prefix (a compressed flag
 * and a 4-byte big-endian length) followed by that many bytes.
 */
export class MessageFrames {
  #prefix = 0;
  #length = 0;
  #left = 0;

  /** Cuts `chunk` where messages end: each piece's size, and whether it ends its message. */
  split(chunk: Uint8Array): { bytes: number; ends: boolean }[] {
    const pieces: { bytes: number; ends: boolean }[] = [];
    let at = 0;
    while (at < chunk.length) {
      const start = at;
      let ends = false;
      while (this.#prefix < PREFIX && at < chunk.length) {
        // Byte 0 is the flag; bytes 1 to 4 the length (a product, not a shift: no sign bit).
        this.#length = this.#prefix === 0 ? 0 : this.#length * 256 + chunk[at]!;
        this.#prefix++;
        at++;
        if (this.#prefix === PREFIX) this.#left = this.#length;
      }
      if (this.#prefix === PREFIX) {
        const body = Math.min(this.#left, chunk.length - at);
        at += body;
        this.#left -= body;
        ends = this.#left === 0;
        if (ends) this.#prefix = 0;
      }
      pieces.push({ bytes: at - start, ends });
    }
    return pieces;
  }
}

/**
 * Holds the bytes of gRPC request messages against the byte budget of request bodies
 * (`--max-inflight-bytes`) from their first byte until a handler has them, as the REST front holds
 * a body from its first byte.
 *
 * @grpc/grpc-js reads every stream as its data comes and gathers each message until it is whole,
 * so HTTP/2 flow control does not bound what it holds: one connection with many streams could make
 * it gather a message of up to `--max-request-size` on each, and hold a unary call's whole message
 * until the client half-closes. So a unary call's bytes are held until its request side ends (the
 * handler then holds the request as any other), and a message of a call whose requests stream
 * (`streaming(path)`) until it is whole, when grpc-js hands it on. A stream whose next bytes do
 * not fit is reset with ENHANCE_YOUR_CALM, which gRPC clients report as RESOURCE_EXHAUSTED, and
 * `refused` is told.
 */
export function holdArrivingMessages(listener: Http2Server, streaming: (path: string) => boolean, hold: () => Hold, refused: () => void): void {
  listener.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    // Only a streaming call's message ends matter; a unary call's bytes are simply counted.
    const frames = streaming(String(headers[":path"])) ? new MessageFrames() : undefined;
    let held = hold();
    const refuse = () => {
      held.release();
      stream.off("data", count);
      // Closing with a code destroys the stream with an error: it is ours, and expected.
      stream.on("error", () => {});
      stream.close(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      refused();
    };
    const count = (chunk: Buffer) => {
      if (frames === undefined) {
        if (!held.take(chunk.length)) refuse();
        return;
      }
      for (const piece of frames.split(chunk)) {
        if (!held.take(piece.bytes)) return refuse();
        if (piece.ends) {
          held.release();
          held = hold();
        }
      }
    };
    const release = () => held.release();
    // Before grpc-js's own listeners: the bytes are returned before its handler holds them again.
    stream.prependListener("data", count);
    stream.prependOnceListener("end", release);
    stream.once("close", release);
  });
}
