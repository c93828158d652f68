/**
 * The client of an inference server over HTTP, with `fetch` only: it runs on Node.js, Bun and in
 * browsers. Its V2 calls (`client.v2`) speak the protocol of any V2 server; its OpenAI calls
 * (`client.openai`) the routes under `/v1`; `post` and `stream` call a server's plain routes.
 */
import { HttpTransport, type CallOptions, type ClientOptions } from "./http-transport.js";
import { packBody, unpackBody } from "./msgpack.js";
import { OpenAIRoutes } from "./openai.js";
import { jsonChunks } from "./streams.js";
import { V2Rest } from "./v2-rest.js";

/** How a plain route's request body is sent. */
export interface RouteOptions extends CallOptions {
  /** `json` (default), `msgpack` (msgpackr, `application/msgpack`), or `bytes` (a Uint8Array as it is). */
  format?: "json" | "msgpack" | "bytes";
}

/** How a plain route's stream is asked for. */
export interface StreamOptions extends RouteOptions {
  /** Server-Sent Events (default) or NDJSON. */
  transport?: "sse" | "ndjson";
}

const CONTENT_TYPES = { json: "application/json", msgpack: "application/msgpack", bytes: "application/octet-stream" } as const;

/** A client of one server, by its base URL (`http://127.0.0.1:8000`). */
export class Client {
  /** The V2 protocol over REST. */
  readonly v2: V2Rest;
  /** The OpenAI-compatible routes under `/v1`. */
  readonly openai: OpenAIRoutes;
  readonly #http: HttpTransport;

  constructor(url: string | URL, options: ClientOptions = {}) {
    this.#http = new HttpTransport(url, options);
    this.v2 = new V2Rest(this.#http);
    this.openai = new OpenAIRoutes(this.#http);
  }

  /**
   * `POST path` with `body` as JSON, MessagePack or bytes, answered by its content type:
   * MessagePack and JSON decoded, text as a string, anything else as a Uint8Array.
   */
  async post<T = unknown>(path: string, body: unknown, options: RouteOptions = {}): Promise<T> {
    const format = options.format ?? "json";
    const accept = format === "bytes" ? "*/*" : CONTENT_TYPES[format];
    return answer<T>(await this.#http.send({ method: "POST", path, body: encode(body, format), headers: { "content-type": CONTENT_TYPES[format], accept } }, options));
  }

  /** `GET path`, answered as {@link post}'s. */
  async get<T = unknown>(path: string, options: CallOptions = {}): Promise<T> {
    return answer<T>(await this.#http.send({ method: "GET", path }, options));
  }

  /**
   * `POST path` to a route that streams: its chunks, parsed from JSON, as they come. Leaving the
   * loop (or the call's signal) closes the stream; an error after the first chunk is thrown as a
   * {@link StreamError}.
   */
  async *stream<T = unknown>(path: string, body: unknown, options: StreamOptions = {}): AsyncGenerator<T> {
    const format = options.format ?? "json";
    const accept = options.transport === "ndjson" ? "application/x-ndjson" : "text/event-stream";
    yield* jsonChunks<T>(await this.#http.send({ method: "POST", path, body: encode(body, format), headers: { "content-type": CONTENT_TYPES[format], accept } }, options));
  }
}

function encode(body: unknown, format: "json" | "msgpack" | "bytes"): Uint8Array | string {
  if (format === "msgpack") return packBody(body);
  if (format === "json") return JSON.stringify(body);
  if (!(body instanceof Uint8Array)) throw new TypeError("a body of format 'bytes' is a Uint8Array");
  return body;
}

async function answer<T>(response: Response): Promise<T> {
  const type = response.headers.get("content-type") ?? "";
  if (type.startsWith("application/msgpack")) return unpackBody(new Uint8Array(await response.arrayBuffer())) as T;
  if (/^application\/([\w.+-]*\+)?json/.test(type)) return (await response.json()) as T;
  if (type.startsWith("text/")) return (await response.text()) as T;
  return new Uint8Array(await response.arrayBuffer()) as T;
}
