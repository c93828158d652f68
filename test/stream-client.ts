/**
 * A client of streamed answers for the tests: one request on its own connection whose body is
 * read only when asked (event by event), so that a test can read slowly, stop, or hang up.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";

/** One Server-Sent Event as a client parses it; a comment has `comment` set instead. */
export interface SseEvent {
  event: string;
  data: string;
  comment?: string;
}

/** The events of an SSE body: blocks separated by a blank line, comments kept. */
export function parseSse(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    const lines = block.split("\n");
    if (lines.every((line) => line.startsWith(":"))) {
      events.push({ event: "", data: "", comment: lines.map((line) => line.slice(1).trim()).join("\n") });
      continue;
    }
    const data: string[] = [];
    let event = "message";
    for (const line of lines) {
      if (line.startsWith("data: ")) data.push(line.slice(6));
      else if (line.startsWith("event: ")) event = line.slice(7);
    }
    events.push({ event, data: data.join("\n") });
  }
  return events;
}

/** The JSON values of the `message` events of an SSE body, comments skipped. */
export function sseData(text: string): any[] {
  return parseSse(text)
    .filter((e) => e.comment === undefined && e.event === "message")
    .map((e) => JSON.parse(e.data));
}

/** A POST whose answer is read a piece at a time. */
export class OpenStream {
  readonly req: ClientRequest;
  readonly response: Promise<IncomingMessage>;
  #buffer = "";
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(port: number, path: string, body: unknown, headers: Record<string, string> = { accept: "text/event-stream" }) {
    this.req = httpRequest({ host: "127.0.0.1", port, path, method: "POST", agent: false, headers: { "content-type": "application/json", ...headers } });
    this.response = new Promise((resolve, reject) => {
      this.req.on("response", (res) => {
        res.setEncoding("utf8");
        res.on("readable", () => this.#poke());
        res.on("end", () => {
          this.#ended = true;
          this.#poke();
        });
        res.on("error", () => {
          this.#ended = true;
          this.#poke();
        });
        resolve(res);
      });
      this.req.on("error", reject);
    });
    // A test that hangs up on purpose does not await the answer.
    this.response.catch(() => {});
    this.req.end(typeof body === "string" ? body : JSON.stringify(body));
  }

  /** Reads up to the next blank line: one SSE event or comment with its framing; undefined at the end of the body. */
  async event(): Promise<string | undefined> {
    return this.#until("\n\n");
  }

  /** Reads up to the next line break: one NDJSON line with it; undefined at the end of the body. */
  async line(): Promise<string | undefined> {
    return this.#until("\n");
  }

  /** Reads the rest of the body. */
  async rest(): Promise<string> {
    const res = await this.response;
    for (;;) {
      const chunk = res.read() as string | null;
      if (chunk !== null) this.#buffer += chunk;
      else if (this.#ended) break;
      else await new Promise<void>((resolve) => (this.#wake = resolve));
    }
    const rest = this.#buffer;
    this.#buffer = "";
    return rest;
  }

  /** Hangs up. */
  destroy(): void {
    this.req.destroy();
  }

  async #until(separator: string): Promise<string | undefined> {
    const res = await this.response;
    for (;;) {
      const at = this.#buffer.indexOf(separator);
      if (at >= 0) {
        const piece = this.#buffer.slice(0, at + separator.length);
        this.#buffer = this.#buffer.slice(at + separator.length);
        return piece;
      }
      const chunk = res.read() as string | null;
      if (chunk !== null) {
        this.#buffer += chunk;
        continue;
      }
      if (this.#ended) {
        const rest = this.#buffer;
        this.#buffer = "";
        return rest === "" ? undefined : rest;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
