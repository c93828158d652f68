/**
 * The client's HTTP calls, with `fetch` only (no Node.js module, so that it runs in browsers as
 * on Node.js and Bun): the base URL and headers, the admin token, the deadline and the caller's
 * signal, request compression, retries of refused calls, and answers that are not a success as
 * {@link HttpError}s.
 */
import { HttpError } from "./errors.js";
import { retryDelay, retryPolicy, type RetryOptions } from "./retry.js";
import { sleep } from "./sleep.js";

/** Options of a client, for all its calls. */
export interface ClientOptions {
  /** Headers sent with every call. */
  headers?: Record<string, string>;
  /** The admin token, sent as `Authorization: Bearer <token>` with load and unload only. */
  adminToken?: string;
  /** Each call's deadline in ms, retries included; none by default. A call past it rejects with the `TimeoutError` of `AbortSignal.timeout`. */
  timeoutMs?: number;
  /** Retries of calls refused with 429 or 503, honouring `Retry-After`. Off by default; `true` for the defaults of {@link RetryOptions}. */
  retry?: RetryOptions | boolean;
  /** Request bodies compressed with this `Content-Encoding` (with the runtime's `CompressionStream`). None by default. */
  compression?: "gzip" | "deflate";
  /** The `fetch` to call, for an agent or a runtime of your own; the global one by default. */
  fetch?: typeof fetch;
}

/** Options of one call, over the client's. */
export interface CallOptions {
  /** Cancels the call: it rejects with the signal's reason, and a stream being read ends. */
  signal?: AbortSignal;
  /** This call's deadline in ms, over the client's `timeoutMs`. */
  timeoutMs?: number;
  /** Headers of this call, over the client's. */
  headers?: Record<string, string>;
  /** This call's retries, over the client's. */
  retry?: RetryOptions | boolean;
  /** This call's request compression, over the client's; `false` for none. */
  compression?: "gzip" | "deflate" | false;
}

/** What one HTTP call sends. */
export interface HttpCall {
  method: "GET" | "POST";
  /** The path and query, from the base URL. */
  path: string;
  body?: Uint8Array | string;
  headers?: Record<string, string>;
  /** Sends the admin token. */
  admin?: boolean;
}

/** The client's HTTP side, shared by its parts. */
export class HttpTransport {
  readonly #base: string;
  readonly #options: ClientOptions;
  readonly #fetch: typeof fetch;

  constructor(url: string | URL, options: ClientOptions = {}) {
    this.#base = String(url).replace(/\/+$/, "");
    this.#options = options;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /**
   * Sends the call (again, as the retry policy says, while it is refused) and resolves with the
   * successful answer, its body unread; rejects with an {@link HttpError} for any other status.
   */
  async send(call: HttpCall, options: CallOptions = {}): Promise<Response> {
    const headers = { ...this.#options.headers, ...call.headers, ...options.headers };
    if (call.admin === true && this.#options.adminToken !== undefined) headers.authorization = `Bearer ${this.#options.adminToken}`;
    let body = call.body;
    const encoding = options.compression ?? this.#options.compression;
    if (body !== undefined && encoding) {
      body = await compress(body, encoding);
      headers["content-encoding"] = encoding;
    }
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs;
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const signals = [options.signal, timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)].filter((s) => s !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const policy = retryPolicy(options.retry ?? this.#options.retry);
    for (let attempt = 1; ; attempt++) {
      const response = await this.#fetch(`${this.#base}${call.path}`, { method: call.method, headers, body: body as Uint8Array<ArrayBuffer> | string | undefined, signal });
      if (response.ok) return response;
      const error = HttpError.of(response.status, response.statusText, response.headers, await response.text());
      const delay = retryDelay(policy, { attempt, status: response.status, retryAfter: response.headers.get("retry-after"), now: Date.now(), deadline });
      if (delay === undefined) throw error;
      await sleep(delay, signal);
    }
  }

  /** Sends the call and resolves with its answer's JSON. */
  async json<T>(call: HttpCall, options?: CallOptions): Promise<T> {
    return (await (await this.send(call, options)).json()) as T;
  }
}

/** A JSON body and its content type, for {@link HttpCall}. */
export function jsonBody(value: unknown): Pick<HttpCall, "body" | "headers"> {
  return { body: JSON.stringify(value), headers: { "content-type": "application/json" } };
}

async function compress(body: Uint8Array | string, encoding: "gzip" | "deflate"): Promise<Uint8Array> {
  const stream = new Blob([body as Uint8Array<ArrayBuffer> | string]).stream().pipeThrough(new CompressionStream(encoding));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
