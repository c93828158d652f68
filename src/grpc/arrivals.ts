import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { ServerInterceptingCall, ServerListenerBuilder, type ServerInterceptor } from "@grpc/grpc-js";
import { CallArrival, type ArrivalDoor } from "./call-arrival.js";

/**
 * The request side of every gRPC call on the port, from its HEADERS: each stream a
 * {@link CallArrival}, and the server interceptor that tells it what grpc-js does with the call
 * (the call object that answers it, each message decoded and handed on, the half close).
 *
 * @grpc/grpc-js reads every stream as its data comes and gathers each message until it is whole,
 * so HTTP/2 flow control does not bound what it holds: one connection with many streams could make
 * it gather a message of up to `--max-request-size` on each, and hold a unary call's whole message
 * until the client half-closes. So a call's bytes are held against `--max-inflight-bytes` from
 * their first byte until a handler has them.
 */
export class Arrivals {
  // The call of the stream grpc-js is making now: noted when a stream opens, before grpc-js's own
  // listener makes the call (and runs the interceptors), and forgotten after it.
  #opening: CallArrival | undefined;

  /** `streaming(path)`: whether the call of that path streams its requests. */
  constructor(
    readonly door: ArrivalDoor,
    readonly streaming: (path: string) => boolean,
  ) {}

  /** Follows the streams of `listener`. */
  watch(listener: Http2Server): void {
    listener.prependListener("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      this.#opening = new CallArrival(stream, this.streaming(String(headers[":path"])), this.door);
    });
    listener.on("stream", () => (this.#opening = undefined));
  }

  /** The server interceptor; after the answers' one, which must be given grpc-js's own call object. */
  readonly interceptor: ServerInterceptor = (_method, call) => {
    const arrival = this.#opening;
    if (arrival === undefined) return call as ServerInterceptingCall;
    arrival.bind(call);
    const listener = new ServerListenerBuilder()
      .withOnReceiveMessage((message, next) => {
        if (!arrival.received(message)) return;
        next(message);
        arrival.handedOn();
      })
      .withOnReceiveHalfClose((next) => {
        next();
        arrival.halfClosed();
      })
      .build();
    return new ServerInterceptingCall(call, { start: (next) => next(listener) });
  };
}
