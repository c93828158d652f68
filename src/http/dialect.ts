import type { HttpRequest } from "./http-message.js";
import type { ShoalError } from "../errors.js";
import type { Step } from "../scheduling/task.js";
import type { RequestMeta } from "../worker.js";

/** What a dialect makes of a request body: the first step's input, and whether the client takes a stream. */
export interface DialectRequest {
  payload: Uint8Array;
  /** True: a stream (Server-Sent Events); false: one answer; undefined: as the `Accept` header says. */
  stream?: boolean;
  /** The steps it goes through, when the body names them (an OpenAI request's `model`). */
  steps?: readonly Step[];
  /** What the request's workers are told in its meta, to read its body and shape its answers (the generate extension's inputs). */
  meta?: Pick<RequestMeta, "generate">;
}

/**
 * The wire format of an API that Shoal speaks on top of its routes and models (the OpenAI API,
 * the V2 generate extension): how its requests become a step's input and how chunks, answers
 * and errors reach its clients. One is made per request, so it may carry the request's own
 * ids. Every hook is optional: without it, bytes pass as they are and errors are Shoal's JSON.
 *
 * The HTTP thread runs these hooks: one that parses what it reads (a body, a Worker's answer)
 * says how many bytes it takes at most in `maxBytes`, which bounds the time it may hold the
 * thread; a larger body is refused (413) before it is read whole, a larger answer fails its
 * request. A dialect that needs more leaves the reading and shaping to the worker, through the
 * request's meta (the generate extension does).
 */
export interface Dialect {
  /** The most bytes of a body `read` parses, or of a Worker's answer or chunk `chunk` and `answer` parse; `--max-request-size` when unset. */
  readonly maxBytes?: number;
  /** Reads the request body. Throws a ShoalError for a request the API refuses. */
  read?(body: Uint8Array, req: HttpRequest): DialectRequest;
  /** One chunk as the client gets it, from the chunk the Worker encoded. */
  chunk?(chunk: Uint8Array): Uint8Array;
  /** The one answer of a request that did not stream, from the body the Worker encoded. */
  answer?(body: Uint8Array): Uint8Array;
  /** An error's JSON body, before or after a stream started. */
  error?(error: ShoalError): unknown;
  /**
   * An error as bare text instead of JSON (Mosec's answers): the body of its answer, sent with no
   * content-type, or, in a stream (`inStream`), the data of the stream's `error` event. Takes
   * the place of `error`.
   */
  errorText?(error: ShoalError, inStream: boolean): string;
  /** Whether a request that takes a stream hears of `error` in the stream even before the first chunk: the stream opens to say it (as Mosec's streams, which open once a request is queued). */
  errorInStream?(error: ShoalError): boolean;
  /** The data of the Server-Sent Events after the last chunk (OpenAI's usage and `[DONE]`). */
  finish?(): string[];
}
