import { ClientError, type WireError } from "../errors.js";
import { HEADER_LENGTH } from "../v2/index.js";
import { joinResponses } from "../v2/join.js";
import type { V2Body, V2InferenceRequest, V2Pieces, V2Tensor } from "../v2/types.js";
import type { RequestMeta, Worker } from "../worker.js";
import type { Failures } from "./batch-runner.js";
import { encodeV2Response, readV2Request } from "./read-v2-request.js";
import type { LoadedMessage, LoadMessage } from "./messages.js";


/**
 * How a model's Worker takes V2 requests and gives V2 tensors, by its runtime (ONNX or a
 * module), and the metadata the coordinator is told of it.
 */
export interface Adapter extends Pick<LoadedMessage, "platform" | "inputs" | "outputs"> {
  /** A decoded request as the Worker's `forward()` takes it. Throws for a request that does not fit the model. */
  toInput(request: V2InferenceRequest): unknown;
  /** What the Worker's `forward()` returned for one request, as output tensors. */
  toTensors(output: unknown): V2Tensor[];
  /** Releases what the model holds outside the JavaScript heap (an ONNX session). */
  unload(): void;
}

/** A model's Worker that speaks V2 ({@link speakingV2} builds its class). */
export interface V2Worker extends Worker {
  /** Its runtime's adapter, made once `init()` has run. */
  readonly adapter: Adapter;
}

/**
 * One batch item as V2 sees it: the request `decode` read, kept for `encode`, and the response
 * `encode` wrote, kept for the answer's content-type and headers.
 */
interface V2Item {
  request: V2InferenceRequest;
  response?: V2Body;
}

// The outputs of a streamed request joined for a client that did not take the stream.
const JOINED = Symbol("joined outputs");
type Joined = { [JOINED]: V2Tensor[] };

// An item's V2 request and response ride on the meta object the runner hands to `decode` and `encode`, which
// lives as long as its item: a WeakMap would do the same at a cost to every garbage collection.
const V2_ITEM = Symbol("v2 item");
type Carrier = RequestMeta & { [V2_ITEM]?: V2Item };

/**
 * A model's Worker class that speaks V2: `decode` reads a V2 request within the worker's limits
 * and gives `forward()` what `adapt` makes of it; `encode` writes the V2 response to that request
 * (the outputs it names, in its order, JSON or binary as it asks), whose content-type and
 * `inference-header-content-length` go with the item. `fields` are set on each instance before
 * its `init()` runs; `adapt` is asked for the instance's {@link Adapter} once `init()` has run.
 */
export function speakingV2<W extends Worker>(
  base: new () => W,
  model: Pick<LoadMessage, "name" | "version">,
  fields: Partial<W>,
  adapt: (worker: W) => Adapter,
): new () => W & V2Worker {
  // The model's class implements forward(); the cast says so of a class TypeScript knows only as a Worker.
  const Base = base as new () => Worker & { forward(data: unknown, meta: unknown): unknown };
  const cls = class extends Base implements V2Worker {
    #adapter!: Adapter;

    constructor() {
      super();
      Object.assign(this, fields);
    }

    get adapter(): Adapter {
      return this.#adapter;
    }

    override async init(): Promise<void> {
      await super.init();
      this.#adapter = adapt(this as unknown as W);
    }

    // What the coordinator takes a response to be when its item names no content-type.
    override get contentType(): string {
      return "application/json";
    }

    // A gRPC request comes in pieces (its raw contents not joined to the header).
    override decode(body: Uint8Array | V2Pieces, meta: RequestMeta): unknown {
      const request = readV2Request(body, headerLength(meta), meta, this.limits);
      const input = this.adapter.toInput(request);
      (meta as Carrier)[V2_ITEM] = { request };
      return input;
    }

    // A streaming model's responses, for a client that takes one answer: one response whose
    // outputs are the chunks' outputs joined along their first dimension.
    override gather(chunks: unknown[]): Joined {
      return { [JOINED]: joinResponses(chunks.map((chunk) => this.adapter.toTensors(chunk))) };
    }

    override encode(output: unknown, meta: RequestMeta): Uint8Array {
      const item = (meta as Carrier)[V2_ITEM]!;
      const { request } = item;
      const outputs = (output as Partial<Joined>)[JOINED] ?? this.adapter.toTensors(output);
      const response = { model_name: model.name, outputs, ...(model.version === "" ? {} : { model_version: model.version }), ...(request.id === undefined ? {} : { id: request.id }) };
      // The codec keeps the outputs the request names, in its order, and refuses unknown names.
      item.response = encodeV2Response(response, request, meta.generate !== undefined);
      return item.response.body;
    }

    override responseType(meta: RequestMeta): string {
      return (meta as Carrier)[V2_ITEM]?.response?.contentType ?? this.contentType;
    }

    override responseHeaders(meta: RequestMeta): Record<string, string> | undefined {
      const length = (meta as Carrier)[V2_ITEM]?.response?.headerLength;
      return length === undefined ? undefined : { [HEADER_LENGTH]: String(length) };
    }
  };
  Object.defineProperty(cls, "name", { value: base.name });
  return cls as unknown as new () => W & V2Worker;
}

/**
 * A model's failures as V2 answers them: a request that does not fit the model (a shape, a
 * missing input) is a 400 where a stage's Worker would say 422, and a request that cannot be
 * read is a bad request.
 */
export const V2_FAILURES: Failures = {
  undecodable: "BAD_REQUEST",
  failedItem: (error: WireError) => (error.code === "VALIDATION" ? { ...error, code: "BAD_REQUEST" } : error),
};

// The codec checks the header's value; a header sent twice is not a length.
function headerLength(meta: RequestMeta): string | undefined {
  const value = meta.headers[HEADER_LENGTH];
  if (Array.isArray(value)) throw new ClientError(`${HEADER_LENGTH} is given ${value.length} times`);
  return value;
}
