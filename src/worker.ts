import { json, type Codec } from "./codecs.js";
import { WorkerMetrics } from "./metrics/worker-metrics.js";
import { WorkerTrace } from "./metrics/worker-trace.js";
import type { Schema } from "./schema.js";
import { UNLIMITED, type RequestLimits } from "./limits.js";
import type { TensorMetadata } from "./v2/types.js";

/** A worker's log: lines go to the server's log, labelled with the stage and worker id. */
export interface WorkerLog {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

// Outside a server (a Worker used offline, in a script or a notebook) lines go to the console.
const consoleLog: WorkerLog = {
  debug: (msg, fields) => console.debug(msg, fields ?? ""),
  info: (msg, fields) => console.info(msg, fields ?? ""),
  warn: (msg, fields) => console.warn(msg, fields ?? ""),
  error: (msg, fields) => console.error(msg, fields ?? ""),
};

/** What `forward()` may know about the request behind one item. */
export interface RequestMeta {
  /** The `x-request-id` of the request (the client's, or one Shoal generated). */
  readonly requestId: string;
  /** The request headers, lower-cased, as Node.js parsed them. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** When the request's deadline passes, in milliseconds since the epoch. */
  readonly deadline: number;
  /** The route the request came in on. */
  readonly route: string;
  /**
   * The query string of the request's URL, without its `?` (`k=3` for `/classify?k=3`), when it
   * has one; read it with `new URLSearchParams(meta.query)`.
   */
  readonly query?: string;
  /**
   * Aborts when the request's answer is no longer wanted: its client disconnected, its deadline
   * passed, or its stream was failed for a client too slow to read it. Set for the items of a
   * Worker that streams; stop generating when it aborts, and the worker's slot is freed.
   */
  readonly signal?: AbortSignal;
  /** True when its client takes the answer as a stream of events (Server-Sent Events or NDJSON). */
  readonly stream?: true;
  /**
   * Set for a request of the V2 generate extension (`/generate`, `/generate_stream`): the body's
   * fields are the model's inputs, typed by these tensors (the model's metadata), and the answer
   * is one JSON object of outputs by name. Shoal's V2 models read the body and shape the answer.
   */
  readonly generate?: readonly TensorMetadata[];
  /**
   * Set for a V2 inference request, over REST or gRPC: the model it is for (a model of the
   * shared pool, or a route served as a model), and its version when it has one.
   */
  readonly v2?: V2Identity;
}

/** What a V2 inference request is for: a model by name, and its version when it has one. */
export interface V2Identity {
  readonly model: string;
  readonly version?: string;
  /** A custom handler of an MLServer model the request calls in place of an inference: its method's name. */
  readonly handler?: string;
}

/** How a streaming Worker's chunks wait for a client that reads slower than they are made. */
export interface StreamSettings {
  /** Bytes of one stream the server holds for its client before the stream is full (default 1 MiB). */
  bufferBytes?: number;
  /**
   * What a full stream does: `"pause"` (default) stops taking chunks from its generator until
   * the client has read the backlog, so generation waits and holds its slot; `"fail"` ends the
   * stream with an error event and aborts its `meta.signal`, freeing the slot at once.
   */
  whenFull?: "pause" | "fail";
  /**
   * How chunks are framed when the client's `Accept` header names neither: `"sse"`
   * (Server-Sent Events, default) or `"ndjson"` (one JSON value a line).
   */
  transport?: "sse" | "ndjson";
}

/**
 * The user's class: one instance per worker thread. The constructor or `init()` loads the model;
 * `forward()` computes.
 *
 * Without batching (`maxBatchSize` 1) `forward()` receives one item and returns one result. With
 * batching it receives an array of 1..maxBatchSize items and returns an array of the same length
 * and order; an `Error` at an index fails only that item.
 *
 * @example
 * ```ts
 * class Double extends Worker {
 *   forward(req: { x: number }) {
 *     return { y: req.x * 2 };
 *   }
 * }
 * ```
 */
export abstract class Worker {
  /**
   * The zod schema of one input item. At a route's first stage the worker parses each decoded
   * item with it: an item that fails is answered 422 with the path of each failing field (the
   * rest of its batch goes on), and `forward()` receives the parsed value. `/openapi.json` shows
   * it as the route's request body. {@link typed} sets it and types `forward()` by it.
   */
  static input?: Schema;
  /**
   * The zod schema of one output item: `/openapi.json` shows it as the response body of the
   * routes this stage ends. Requests do not pay for a check of every result; the outputs of the
   * warm-up examples are checked against it at start-up.
   */
  static output?: Schema;
  /**
   * When true, `forward()` receives arrays (of 1..maxBatchSize items) even when `maxBatchSize`
   * is 1. {@link typedBatch} sets it.
   */
  static batched = false;
  /**
   * When set, `forward()` returns for each item an async iterable of chunks (an async generator,
   * typically) instead of one result: each request gets its own stream, as Server-Sent Events or
   * NDJSON, and the worker takes its next batch once every stream of the batch has ended. Clients
   * that do not ask for a stream get the chunks {@link gather}ed into one answer. Each item's
   * `meta.signal` aborts when its stream is no longer wanted. See docs/streaming.md.
   *
   * @example
   * ```ts
   * class Count extends Worker {
   *   static streaming = true;
   *   async *forward(req: { n: number }, meta: RequestMeta) {
   *     for (let i = 0; i < req.n && !meta.signal?.aborted; i++) yield { i };
   *   }
   * }
   * ```
   */
  static streaming: boolean | StreamSettings = false;
  /**
   * When a batch of several items fails as a whole (`forward()` throws), the worker runs it again
   * in halves, down to single items, so that only the items at fault fail and the others get
   * their answers (docs/lifecycle.md, "A batch that fails as a whole"). Set it to false for a
   * `forward()` with side effects, or too costly to run twice: the whole batch then fails with
   * the exception, as it is.
   */
  static splitFailedBatches = true;

  /** 1..num within the stage. Set before `init()` runs (not yet inside the constructor). */
  workerId = 0;
  /** The stage's name, e.g. `"CalculateExp_1"`. Set before `init()` runs. */
  stage = "";
  /** The stage's maximum batch size. Set before `init()` runs. */
  maxBatchSize = 1;
  /** How many workers the stage runs in parallel (its `num`). Set before `init()` runs. */
  num = 1;
  /**
   * What one request may make this worker allocate: the server's `--max-tensor-elements` and
   * `--max-bytes-elements`. Set before `init()` runs; unbounded outside a server.
   */
  limits: RequestLimits = UNLIMITED;
  /**
   * How the first stage decodes request bodies and the last stage encodes responses.
   * Defaults to JSON; set it to `codecs.msgpack` or `codecs.bytes`, or to your own {@link Codec}.
   */
  codec: Codec = json;
  /**
   * One input in the shape of a single item of `forward()` (an item, not a batch): the worker
   * runs it through `forward()` before it reports ready. `--dry-run` sends the first stage's
   * example through the whole pipeline.
   */
  example?: unknown;
  /** Several warm-up inputs, each in the shape of one item; sent as batches when batching. */
  examples?: unknown[];
  /** Lines for the server's log, labelled with this worker's stage and id. */
  log: WorkerLog = consoleLog;
  /** This worker's own Prometheus metrics, shown in the server's `/metrics` with a worker label. */
  readonly metrics = new WorkerMetrics();
  /** Spans and attributes of this worker's own, in the trace of the batch it runs (when tracing is on). */
  readonly trace = new WorkerTrace();

  /** Runs once in the worker before it takes work: load the model here. */
  init(): void | Promise<void> {}

  /**
   * Computes the result of one item, or of a batch of items when `maxBatchSize` > 1.
   * Throw a {@link ValidationError} (422), {@link ClientError} (400) or {@link ServerError} (500) to
   * choose the status; any other exception is a 500 whose text is logged, not sent.
   */
  abstract forward(data: any, meta: any): unknown;

  /**
   * Request bytes to `forward()`'s input (first stage of a route only). Defaults to
   * `codec.decode`. `meta` (its headers, say) lets an override decode each request by its own
   * content-type.
   */
  decode(body: Uint8Array, _meta?: RequestMeta): unknown {
    return this.codec.decode(body);
  }

  /** `forward()`'s output to response bytes (last stage of a route only). Defaults to `codec.encode`. */
  encode(output: unknown, _meta?: RequestMeta): Uint8Array {
    return this.codec.encode(output);
  }

  /**
   * The one answer of a streamed item for a client that does not take streams, or for the next
   * stage when this one is not the route's last: by default the array of its chunks.
   */
  gather(chunks: unknown[], _meta?: RequestMeta): unknown {
    return chunks;
  }

  /** The content-type of responses this worker encodes. Defaults to `codec.contentType`. */
  get contentType(): string {
    return this.codec.contentType;
  }

  /**
   * The content-type of the response to one request. Defaults to {@link contentType}; override
   * it, with `decode()` and `encode()`, to answer each request in the format it came in.
   */
  responseType(_meta?: RequestMeta): string {
    return this.contentType;
  }

  /**
   * Response headers of its own for one request, beside its content-type: a model served with
   * the V2 protocol gives a binary response's `inference-header-content-length` here. A stage's
   * responses do not carry them.
   * @internal
   */
  responseHeaders(_meta?: RequestMeta): Record<string, string> | undefined {
    return undefined;
  }
}

/** A class that builds a {@link Worker}, with its static declarations. */
export type WorkerClass = (new () => Worker) & Pick<typeof Worker, "input" | "output" | "batched"> & Partial<Pick<typeof Worker, "streaming" | "splitFailedBatches">> & { readonly stepwise?: boolean };
