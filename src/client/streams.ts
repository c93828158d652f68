/**
 * Streamed answers read as they arrive: Server-Sent Events and NDJSON, as async iterators. Leaving
 * the loop early (`break`, an exception, the call's signal) cancels the body, which closes the
 * stream at the server.
 */
import { ProtocolError, StreamError } from "./errors.js";

/** One Server-Sent Event: its type (`message` unless named), its data lines joined with LF. */
export interface ServerSentEvent {
  event: string;
  data: string;
  id?: string;
}

// The lines of a body, however they end (LF, CRLF, CR), decoded as UTF-8.
async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      text += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // A CR at the very end may be the first half of a CRLF: it waits for the next chunk.
      for (let end = text.search(/\r\n|\r(?!$)|\n/); end >= 0; end = text.search(/\r\n|\r(?!$)|\n/)) {
        yield text.slice(0, end);
        text = text.slice(end + (text.startsWith("\r\n", end) ? 2 : 1));
      }
      if (done) {
        if (text !== "") yield text.replace(/\r$/, "");
        return;
      }
    }
  } finally {
    // Ends the body when the reader leaves before it is done; a no-op when it is.
    reader.cancel().catch(() => undefined);
  }
}

/** The events of a `text/event-stream` body, as the EventSource specification parses them (comments skipped). */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  let data: string[] = [];
  let event = "";
  let id: string | undefined;
  for await (const line of lines(body)) {
    if (line === "") {
      if (data.length > 0) yield { event: event || "message", data: data.join("\n"), ...(id === undefined ? {} : { id }) };
      data = [];
      event = "";
      continue;
    }
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id") id = value;
  }
}

/**
 * The JSON chunks of a streamed answer, Server-Sent Events or NDJSON by its content type.
 * `data: [DONE]` (the OpenAI API's end) ends it; an error event (`event: error`, or a chunk that
 * is only `{"error": ...}`, as Shoal, Triton and the OpenAI API send one) is thrown as a
 * {@link StreamError}.
 */
export async function* jsonChunks<T>(response: Response): AsyncGenerator<T> {
  const body = response.body;
  if (body === null) return;
  const sse = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
  if (sse) {
    for await (const { event, data } of serverSentEvents(body)) {
      if (data === "[DONE]") return;
      yield chunk<T>(data, event === "error");
    }
    return;
  }
  for await (const line of lines(body)) if (line.trim() !== "") yield chunk<T>(line, false);
}

function chunk<T>(text: string, error: boolean): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    if (error) throw new StreamError(text, text);
    throw new ProtocolError(`a streamed chunk is not JSON: ${text.slice(0, 200)}`);
  }
  const said = typeof value === "object" && value !== null && "error" in value && Object.keys(value).length === 1 ? (value as { error: unknown }).error : undefined;
  if (error || said !== undefined) {
    const message = typeof said === "string" ? said : typeof said === "object" && said !== null && typeof (said as { message?: unknown }).message === "string" ? (said as { message: string }).message : text;
    throw new StreamError(message, value);
  }
  return value as T;
}
