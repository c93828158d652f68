/**
 * One `ModelStreamInfer` call: requests sent as the caller has them, answers read as an async
 * iterator, each a response or the error of its request (the stream goes on after it).
 */
import type { ClientDuplexStream, ServiceError } from "@grpc/grpc-js";
import type { InferResponseMessage } from "../../grpc/messages.js";
import type { V2InferenceResponse } from "../../v2/types.js";
import { toRequest, type InferInput } from "../tensors.js";
import { GrpcError } from "./grpc-error.js";
import { inferRequestMessage, inferResponse } from "./infer-messages.js";

/** An answer on the stream: a response, or the error of one request (`error_message`). */
export type StreamAnswer = { ok: true; response: V2InferenceResponse } | { ok: false; error: string };

type Message = { error_message: string; infer_response: InferResponseMessage | null };

// Answers held unread before the stream is paused: the server then waits, under flow control.
const HIGH_WATER = 64;

/** A `ModelStreamInfer` call; made by `GrpcClient.stream()`. */
export class InferStream implements AsyncIterable<StreamAnswer> {
  readonly #call: ClientDuplexStream<unknown, Message>;
  readonly #answers: StreamAnswer[] = [];
  #failure: unknown;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(call: ClientDuplexStream<unknown, Message>, signal: AbortSignal | undefined) {
    this.#call = call;
    call.on("data", (message: Message) => {
      try {
        this.#answers.push(message.infer_response === null || message.error_message !== "" ? { ok: false, error: message.error_message } : { ok: true, response: inferResponse(message.infer_response) });
      } catch (err) {
        // A response that does not fit its outputs: the stream cannot be trusted further.
        this.#finish(err);
        call.cancel();
        return;
      }
      if (this.#answers.length >= HIGH_WATER) call.pause();
      this.#notify();
    });
    call.on("end", () => this.#finish(undefined));
    call.on("error", (err: ServiceError) => this.#finish(signal?.aborted === true ? signal.reason : new GrpcError(err)));
    if (signal !== undefined) {
      if (signal.aborted) call.cancel();
      else signal.addEventListener("abort", () => call.cancel(), { once: true });
    }
  }

  /** Sends one request to `model` (`version`: the server's choice when absent); match its answer by `id`. */
  send(model: string, input: InferInput, version = ""): void {
    this.#call.write(inferRequestMessage(model, version, toRequest(input)));
  }

  /** No more requests: the stream ends once the server has answered those sent. */
  end(): void {
    this.#call.end();
  }

  /** Cancels the call; the iterator ends (with a CANCELLED {@link GrpcError}, or the signal's reason). */
  cancel(): void {
    this.#call.cancel();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamAnswer> {
    try {
      for (;;) {
        const answer = this.#answers.shift();
        if (answer !== undefined) {
          if (this.#answers.length < HIGH_WATER / 2) this.#call.resume();
          yield answer;
          continue;
        }
        if (this.#ended) {
          if (this.#failure !== undefined) throw this.#failure;
          return;
        }
        await new Promise<void>((resolve) => (this.#wake = resolve));
      }
    } finally {
      // A reader that leaves early ends the call.
      if (!this.#ended) this.#call.cancel();
    }
  }

  #finish(failure: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#failure = failure;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
