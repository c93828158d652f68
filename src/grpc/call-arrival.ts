import { constants, type ServerHttp2Stream } from "node:http2";
import { status, type ServerInterceptingCallInterface } from "@grpc/grpc-js";
import { ShoalError } from "../errors.js";
import type { Admission, Upload } from "../serving/admission.js";
import { overBudget, type Hold } from "../serving/byte-budget.js";
import { MessageFrames } from "./message-frames.js";
import { MESSAGE_BYTES } from "./message-buffer.js";

/**
 * What each open call holds of the budget of request bytes (`--max-inflight-bytes`) for as long
 * as it is open, whatever it sends: about what its stream and call objects cost the server, so
 * that calls opened with HEADERS alone are bounded by the budget too.
 */
export const CALL_SHARE = 8 * 1024;

// How long a call ended early has for its status to go out before its stream is reset.
const END_GRACE_MS = 5000;

/** On a decoded inference message: the call it came on, which holds its bytes until {@link takeHold}. */
export const ARRIVAL = Symbol("arrival");

/** A message's bytes held since they arrived, and when its first byte came (performance.now()). */
export interface Arrived {
  readonly hold: Hold;
  readonly at: number;
}

/** What a call's arrival needs of its door. */
export interface ArrivalDoor {
  readonly admission: Admission;
  /** Time a request message has from its first byte (the call's HEADERS, for its first) to its last, in ms (`--request-timeout`). */
  readonly requestTimeoutMs: number;
  /** A call was reset because its bytes did not fit in the budget. */
  refused(): void;
}

/**
 * One gRPC call's request side as it arrives, from its HEADERS until its stream closes: its
 * share of the byte budget ({@link CALL_SHARE}) and the bytes of each message from their first
 * byte until a handler has them (as the REST door holds a body from its first byte, and the
 * inflated bytes once grpc-js has inflated a compressed message); the deadline of each message
 * (`--request-timeout` from its first byte, DEADLINE_EXCEEDED past it); and, for a drain, the
 * call in flight from its first byte while a message is on its way (the admission's
 * `uploading`). A call whose bytes do not fit is reset with ENHANCE_YOUR_CALM, which gRPC clients
 * report as RESOURCE_EXHAUSTED.
 *
 * A unary call's message is the handler's at the half close; a streaming call's each message
 * is, when grpc-js hands it on.
 */
export class CallArrival {
  readonly #share: Hold;
  #current: Hold;
  // When the message arriving now began: the HEADERS, for the first.
  #at = 0;
  // A streaming call's messages whole, not yet handed on: their bytes as they came.
  readonly #whole: Arrived[] = [];
  // Decoded messages handed on and not yet taken by their handler: their inflated bytes.
  readonly #given = new Map<object, Arrived>();
  readonly #frames: MessageFrames | undefined;
  // Messages begun and not handed on; the first is begun by the HEADERS.
  #pending = 1;
  #between = false;
  #upload: Upload | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stuck: NodeJS.Timeout | undefined;
  #call: ServerInterceptingCallInterface | undefined;
  #closed = false;

  constructor(
    readonly stream: ServerHttp2Stream,
    streaming: boolean,
    readonly door: ArrivalDoor,
  ) {
    const { admission } = door;
    this.#frames = streaming ? new MessageFrames() : undefined;
    this.#share = admission.hold();
    this.#current = admission.hold();
    stream.once("close", () => this.#close());
    if (!this.#share.take(CALL_SHARE)) {
      this.reset();
      return;
    }
    const now = performance.now();
    admission.arrived(now);
    this.#begun(now);
    // Before grpc-js's own listeners: the bytes are counted before it gathers them.
    stream.prependListener("data", (chunk: Buffer) => this.#data(chunk));
    stream.prependOnceListener("end", () => this.#ended());
  }

  /** grpc-js's call object of this stream, which answers the call when it must end early. */
  bind(call: ServerInterceptingCallInterface): void {
    this.#call = call;
  }

  /**
   * A message decoded by grpc-js, on its way to the handler: the bytes it came with give way to
   * its inflated bytes (an inference message's), held until its handler takes them. Returns
   * false, the call ended RESOURCE_EXHAUSTED, when those do not fit.
   */
  received(message: unknown): boolean {
    // A unary call's message may be decoded before its half close: its bytes so far are its.
    const raw = this.#frames === undefined ? this.#swap() : this.#whole.shift();
    const at = raw?.at ?? performance.now();
    const bytes = typeof message === "object" && message !== null ? (message as { [MESSAGE_BYTES]?: number })[MESSAGE_BYTES] : undefined;
    if (bytes !== undefined) {
      const hold = this.door.admission.hold();
      if (!hold.take(bytes)) {
        raw?.hold.release();
        this.door.refused();
        this.end(overBudget());
        return false;
      }
      this.#given.set(message as object, { hold, at });
      (message as { [ARRIVAL]?: CallArrival })[ARRIVAL] = this;
    }
    raw?.hold.release();
    return true;
  }

  /** A streaming call's message is the handler's now. */
  handedOn(): void {
    if (this.#frames !== undefined) this.#settled(1);
  }

  /** The half close reached the handler: every message of the call is its. */
  halfClosed(): void {
    this.#settled(this.#pending);
  }

  /** The hold of `message`'s bytes, now its handler's to release, and when it began to arrive. */
  take(message: object): Arrived | undefined {
    const arrived = this.#given.get(message);
    this.#given.delete(message);
    return arrived;
  }

  /** Ends the call early with `error`'s status, and its stream, so that it holds nothing more. */
  end(error: ShoalError): void {
    if (this.#closed) return;
    const call = this.#call;
    if (call === undefined) {
      this.reset();
      return;
    }
    call.sendStatus({ code: status[error.grpc], details: error.publicMessage });
    // The client may keep its side open: the stream is closed once the status is out, or reset
    // if the status cannot go out (answers ahead of it that the client does not read).
    const close = (code: number) => {
      if (!this.#closed) this.stream.close(code);
    };
    this.#stuck = setTimeout(() => close(constants.NGHTTP2_CANCEL), END_GRACE_MS);
    if (this.stream.writableFinished) setImmediate(() => close(constants.NGHTTP2_NO_ERROR));
    else this.stream.once("finish", () => setImmediate(() => close(constants.NGHTTP2_NO_ERROR)));
  }

  /** Resets the stream at once (ENHANCE_YOUR_CALM). */
  reset(): void {
    // Closing with a code destroys the stream with an error: it is ours, and expected.
    this.stream.on("error", () => {});
    if (!this.#closed) this.stream.close(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    this.door.refused();
  }

  #data(chunk: Buffer): void {
    if (this.#frames === undefined) {
      if (!this.#current.take(chunk.length)) this.reset();
      return;
    }
    for (const piece of this.#frames.split(chunk)) {
      if (this.#between && piece.bytes > 0) {
        this.#between = false;
        this.#pending++;
        this.#begun(performance.now());
      }
      if (!this.#current.take(piece.bytes)) return this.reset();
      if (piece.ends) {
        this.#whole.push(this.#swap());
        this.#between = true;
        clearTimeout(this.#timer);
      }
    }
  }

  // The request side ended: a unary call's message is whole; a stream's messages not whole never come.
  #ended(): void {
    clearTimeout(this.#timer);
    if (this.#frames !== undefined) this.#settled(this.#pending - this.#whole.length);
  }

  #swap(): Arrived {
    const arrived = { hold: this.#current, at: this.#at };
    this.#current = this.door.admission.hold();
    return arrived;
  }

  // A message's first byte, at `now`: its deadline, and the call in flight for a drain.
  #begun(now: number): void {
    const { admission, requestTimeoutMs } = this.door;
    this.#at = now;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.end(new ShoalError("TIMEOUT", `no whole request message within ${requestTimeoutMs} ms of its first byte (--request-timeout)`)), requestTimeoutMs);
    if (this.#upload === undefined && admission.refusal(now) === undefined) {
      this.#upload = admission.uploading(this, (arrival, error) => arrival.end(error));
    }
  }

  // `count` messages are the handler's (or will never come): once none is on its way, the call is no longer an upload.
  #settled(count: number): void {
    this.#pending = Math.max(0, this.#pending - count);
    if (this.#pending > 0 || this.#upload === undefined) return;
    this.door.admission.uploaded(this.#upload);
    this.#upload = undefined;
  }

  #close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#stuck);
    this.#share.release();
    this.#current.release();
    for (const { hold } of this.#whole.splice(0)) hold.release();
    for (const { hold } of this.#given.values()) hold.release();
    this.#given.clear();
    this.#settled(this.#pending);
  }
}

/** The call an inference message came on, when it was followed from its arrival. */
export function arrivalOf(message: object): CallArrival | undefined {
  return (message as { [ARRIVAL]?: CallArrival })[ARRIVAL];
}

/** The hold of an inference message's bytes from its arrival, now the caller's, and when it began; undefined for a message that came with none. */
export function takeArrived(message: object): Arrived | undefined {
  return arrivalOf(message)?.take(message);
}
