/**
 * What the client throws besides the runtime's own errors (a network failure, and the signal's
 * reason when a call is cancelled or its deadline passes: `AbortError`, `TimeoutError`).
 */

// The most of an answer's text that becomes a message (a proxy's HTML page can be long).
const MAX_MESSAGE = 1000;

/**
 * An HTTP answer that is not a success: its status and the server's message, which V2 servers
 * (Shoal, Triton, MLServer, KServe) send as `{"error": "..."}` (FastAPI's, as MLServer's unknown
 * paths, as `{"detail": "..."}`); else the body's text, or the status text.
 */
export class HttpError extends Error {
  override readonly name = "HttpError";

  constructor(
    /** The HTTP status. */
    readonly status: number,
    message: string,
    /** The answer's body, parsed when it was JSON, else its text. */
    readonly body: unknown,
    /** The answer's headers (`retry-after`, `www-authenticate`, `x-request-id`, ...). */
    readonly headers: Headers,
  ) {
    super(message);
  }

  /** The error of an answer whose body has been read as `text`. */
  static of(status: number, statusText: string, headers: Headers, text: string): HttpError {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: the text is the message.
    }
    const fields = typeof body === "object" && body !== null ? (body as { error?: unknown; detail?: unknown }) : {};
    const said = typeof fields.error === "string" ? fields.error : typeof fields.detail === "string" ? fields.detail : text.trim().slice(0, MAX_MESSAGE);
    return new HttpError(status, said === "" ? `${status} ${statusText}`.trim() : said, body, headers);
  }
}

/** An answer that does not follow its protocol: a malformed V2 response, an event that is not JSON. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
}

/**
 * A stream that failed after it began: the server's error event (Server-Sent Events'
 * `event: error`, an NDJSON line `{"error": ...}`) with its message.
 */
export class StreamError extends Error {
  override readonly name = "StreamError";

  constructor(
    message: string,
    /** The error event's data, parsed. */
    readonly data: unknown,
  ) {
    super(message);
  }
}
