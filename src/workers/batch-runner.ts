import { errorToWire, type ErrorCode, type WireError } from "../errors.js";
import { REPORT_INTERVAL_MS } from "../metrics/worker-metrics.js";
import { parseItem, toJsonSchema, type Schema } from "../schema.js";
import type { RequestMeta, Worker, WorkerClass, WorkerLog } from "../worker.js";
import type { BatchItem, BatchMessage, FromWorker, ItemResult, LogMessage, ReadyMessage, ResultMessage, StageBoot } from "./messages.js";
import { transferablesOf } from "./transfer.js";
import { decodeV2Item, encodeV2Answer, isV2Request, type V2Carried, type V2Reply } from "./v2-route.js";

/** A result message and the buffers it moves. */
export interface Outgoing {
  message: ResultMessage;
  transfer: ArrayBuffer[];
}

/**
 * What a runner answers where a model served with the V2 protocol differs from a stage: the code
 * of a request that could not be decoded when what was thrown is not a Shoal error, and the
 * error of an item that `forward()` failed.
 */
export interface Failures {
  /** A stage's is DECODING. */
  undecodable: ErrorCode;
  /** A stage answers the error as it is. */
  failedItem(error: WireError): WireError;
}

const STAGE_FAILURES: Failures = { undecodable: "DECODING", failedItem: (error) => error };

/** Who runs the batches: a stage's worker, or one model instance on a worker of the shared pool (named by its instance). */
export type RunnerIdentity = Pick<StageBoot, "workerId" | "stageName" | "maxBatchSize" | "num" | "limits">;

/**
 * The worker side of a stage or of a model instance, whatever the channel: builds the user's
 * Worker, then runs each batch as decode (first stage) → forward → encode (last stage), keeping
 * failures per item. A model's Worker decodes V2 requests and encodes V2 responses in its own
 * `decode` and `encode` (see v2-worker.ts).
 */
export class BatchRunner<W extends Worker = Worker> {
  // What the Worker class declares: item schemas, and whether forward() always takes arrays.
  readonly #input: Schema | undefined;
  readonly #output: Schema | undefined;
  readonly #batched: boolean;
  readonly #stage: boolean;
  // The first warm-up example as forward() received it (parsed), for --dry-run.
  #example: unknown;
  #metricsTimer: NodeJS.Timeout | undefined;

  private constructor(
    readonly worker: W,
    readonly boot: RunnerIdentity,
    readonly failures: Failures,
  ) {
    const cls = worker.constructor as WorkerClass;
    // A stage's runner; a model's Worker speaks V2 in its own decode and encode.
    this.#stage = failures === STAGE_FAILURES;
    this.#input = cls.input;
    this.#output = cls.output;
    this.#batched = cls.batched;
  }

  /**
   * Constructs the Worker, gives it its identity and log, runs its `init()` and its warm-up
   * examples, and starts reporting its metrics through `send`. `failures` are a stage's unless
   * given.
   */
  static async start<W extends Worker>(cls: new () => W, boot: RunnerIdentity, send: (message: FromWorker) => void, failures = STAGE_FAILURES): Promise<BatchRunner<W>> {
    const worker = new cls();
    worker.workerId = boot.workerId;
    worker.stage = boot.stageName;
    worker.maxBatchSize = boot.maxBatchSize;
    worker.num = boot.num;
    worker.limits = boot.limits;
    worker.log = logTo(send);
    await worker.init();
    const runner = new BatchRunner(worker, boot, failures);
    await runner.#warmUp();
    runner.#reportMetrics(send);
    return runner;
  }

  /**
   * The message that tells the coordinator this worker takes work, with what the coordinator
   * may know of the Worker without running its code: its content-type, its first example, and
   * its schemas in JSON Schema (for `/openapi.json`).
   */
  get ready(): ReadyMessage {
    const message: ReadyMessage = { kind: "ready", contentType: this.worker.contentType };
    if (this.#example !== undefined) message.example = this.#example;
    if (this.#input !== undefined || this.#output !== undefined) {
      message.schemas = {};
      if (this.#input !== undefined) message.schemas.input = toJsonSchema(this.#input, "input");
      if (this.#output !== undefined) message.schemas.output = toJsonSchema(this.#output, "output");
    }
    return message;
  }

  // Runs the declared examples through forward(), in batches when the stage batches, checking
  // them against the input schema and their results against the output schema. A failure stops
  // the worker from starting, with a message that names the worker and the example.
  async #warmUp(): Promise<void> {
    const { worker, boot } = this;
    const examples = worker.examples ?? (worker.example === undefined ? [] : [worker.example]);
    const size = boot.maxBatchSize;
    for (let i = 0; i < examples.length; i += size) {
      const declared = examples.slice(i, i + size);
      const metas = declared.map(() => ({ requestId: "warm-up", headers: {}, deadline: Infinity, route: "" }));
      const which = declared.length === 1 ? `example ${i + 1}` : `examples ${i + 1}-${i + declared.length}`;
      const fail = (why: string) =>
        new Error(`warm-up of ${boot.stageName} worker ${boot.workerId} failed on ${which} of ${examples.length} (${preview(declared[0])}): ${why}`);
      const chunk = await conforming(this.#input, declared).catch((err: Error) => {
        throw fail(`an example does not match the input schema: ${err.message}`);
      });
      this.#example ??= chunk[0];
      let outputs: unknown[];
      try {
        outputs = await this.#forward(chunk, metas);
      } catch (err) {
        throw fail(err instanceof Error ? err.message : String(err));
      }
      if (!Array.isArray(outputs) || outputs.length !== chunk.length) throw fail(`forward() did not return one result per example`);
      const error = outputs.find((out): out is Error => out instanceof Error);
      if (error !== undefined) throw fail(error.message);
      await conforming(this.#output, outputs).catch((err: Error) => {
        throw fail(`a result does not match the output schema: ${err.message}`);
      });
    }
  }

  // Sends the Worker's own metrics to the coordinator while it has any, when they change.
  #reportMetrics(send: (message: FromWorker) => void): void {
    const { registry } = this.worker.metrics;
    let last = "";
    this.#metricsTimer = setInterval(async () => {
      if (registry.getMetricsAsArray().length === 0) return;
      const metrics = await registry.getMetricsAsJSON();
      const text = JSON.stringify(metrics);
      if (text === last) return;
      last = text;
      send({ kind: "metrics", metrics });
    }, REPORT_INTERVAL_MS).unref();
  }

  /** Stops reporting the Worker's metrics, when the runner is dropped (a model unloaded). */
  stop(): void {
    clearInterval(this.#metricsTimer);
  }

  async run(batch: BatchMessage): Promise<Outgoing> {
    const { items, seq } = batch;
    const results: ItemResult[] = new Array(items.length);
    const inputs: unknown[] = [];
    const metas: RequestMeta[] = [];
    const positions: number[] = [];
    // The reply of each item that came as a V2 request for its route, by position in `inputs`.
    const replies: (V2Reply | undefined)[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      let value = item.payload;
      let reply: V2Reply | undefined;
      if (item.ingress) {
        const decoded = this.#decode(item);
        if (!decoded.ok) {
          results[i] = decoded;
          continue;
        }
        value = decoded.value;
      }
      if (this.#stage && isV2Request(item.meta)) ({ v2Reply: reply, value } = value as V2Carried);
      if (item.ingress && this.#input !== undefined) {
        const parsed = await validate(this.#input, value);
        if (!parsed.ok) {
          results[i] = parsed;
          continue;
        }
        value = parsed.value;
      }
      inputs.push(value);
      metas.push(item.meta);
      positions.push(i);
      replies.push(reply);
    }
    const transfer = new Set<ArrayBuffer>();
    if (inputs.length > 0) {
      let outputs: unknown[];
      try {
        outputs = await this.#forward(inputs, metas);
      } catch (err) {
        return { message: { kind: "result", seq, error: errorToWire(err) }, transfer: [] };
      }
      if (!Array.isArray(outputs) || outputs.length !== inputs.length) {
        const got = Array.isArray(outputs) ? `an array of ${outputs.length}` : typeof outputs;
        const error: WireError = {
          code: "INTERNAL",
          message: "",
          stack: `${this.boot.stageName} worker ${this.boot.workerId}: forward() returned ${got} for a batch of ${inputs.length}; it must return one result per item, in order`,
        };
        return { message: { kind: "result", seq, error }, transfer: [] };
      }
      for (let j = 0; j < outputs.length; j++) {
        const at = positions[j]!;
        results[at] = this.#finish(outputs[j], items[at]!, transfer, replies[j]);
      }
    }
    return { message: { kind: "result", seq, results }, transfer: [...transfer] };
  }

  // The Worker's decode, or for a V2 request the V2 codec's, its reply carried with the value.
  #decode(item: BatchItem): ItemResult {
    try {
      if (this.#stage && isV2Request(item.meta)) {
        const { item: value, reply } = decodeV2Item(item.payload as Uint8Array, item.meta, this.boot.limits);
        return { ok: true, value: { v2Reply: reply, value } satisfies V2Carried };
      }
      return { ok: true, value: this.worker.decode(item.payload as Uint8Array, item.meta) };
    } catch (err) {
      return { ok: false, error: errorToWire(err, this.failures.undecodable) };
    }
  }

  // A batching Worker gets the whole batch in one call. Otherwise each item is its own call (the
  // coordinator may send several at once to save round trips), and an exception thrown for one
  // item is that item's result alone. A Worker declared `batched` then gets batches of one, so
  // that maxBatchSize stays the most it is given.
  async #forward(inputs: unknown[], metas: RequestMeta[]): Promise<unknown[]> {
    if (this.boot.maxBatchSize > 1) return (await this.worker.forward(inputs, metas)) as unknown[];
    const outputs: unknown[] = new Array(inputs.length);
    for (let i = 0; i < inputs.length; i++) {
      try {
        outputs[i] = this.#batched ? onlyResult(await this.worker.forward([inputs[i]], [metas[i]])) : await this.worker.forward(inputs[i], metas[i]);
      } catch (err) {
        outputs[i] = err instanceof Error ? err : new Error(String(err));
      }
    }
    return outputs;
  }

  #finish(output: unknown, { egress, meta }: BatchItem, transfer: Set<ArrayBuffer>, reply: V2Reply | undefined): ItemResult {
    if (output instanceof Error) return { ok: false, error: this.failures.failedItem(errorToWire(output)) };
    if (reply !== undefined) {
      if (egress) return v2Answer(output, reply, transfer);
      output = { v2Reply: reply, value: output } satisfies V2Carried;
    }
    if (!egress) {
      const own = transferablesOf(output);
      for (const buffer of own) transfer.add(buffer);
      return own.size > 0 ? { ok: true, value: output, transfer: [...own] } : { ok: true, value: output };
    }
    try {
      const { worker } = this;
      const body = exclusive(worker.encode(output, meta));
      if (body.byteLength > 0) transfer.add(body.buffer as ArrayBuffer);
      const contentType = worker.responseType(meta);
      const headers = worker.responseHeaders(meta);
      if (headers !== undefined) return { ok: true, value: body, contentType, headers };
      return contentType === worker.contentType ? { ok: true, value: body } : { ok: true, value: body, contentType };
    } catch (err) {
      return { ok: false, error: errorToWire(err, "ENCODING") };
    }
  }
}

// The answer to a V2 request for a route, from its last stage's output.
function v2Answer(output: unknown, reply: V2Reply, transfer: Set<ArrayBuffer>): ItemResult {
  try {
    const { body, contentType, headerLength } = encodeV2Answer(output, reply);
    const own = exclusive(body);
    if (own.byteLength > 0) transfer.add(own.buffer as ArrayBuffer);
    return { ok: true, value: own, contentType, ...(headerLength === undefined ? {} : { headers: { "inference-header-content-length": String(headerLength) } }) };
  } catch (err) {
    return { ok: false, error: errorToWire(err, "ENCODING") };
  }
}

// Response bytes move to the coordinator. A view into a larger buffer (a socket chunk, an
// encoder's scratch space) is first copied to a buffer of its own, since cloning the view would
// copy the whole buffer behind it.
function exclusive(body: Uint8Array): Uint8Array {
  if (!(body instanceof Uint8Array)) throw new TypeError(`encode() must return a Uint8Array, not ${typeof body}`);
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer) return body;
  return Uint8Array.prototype.slice.call(body);
}

// The result of a batch of one, from a Worker that computes batches.
function onlyResult(outputs: unknown): unknown {
  if (!Array.isArray(outputs) || outputs.length !== 1) {
    const got = Array.isArray(outputs) ? `an array of ${outputs.length}` : typeof outputs;
    throw new Error(`forward() returned ${got} for a batch of 1; it must return one result per item`);
  }
  return outputs[0];
}

// A decoded request parsed by the input schema. A ValidationError is the client's 422; anything
// else thrown (a refinement with a bug) is a 500 whose stack is logged.
async function validate(schema: Schema, value: unknown): Promise<ItemResult> {
  try {
    return { ok: true, value: await parseItem(schema, value) };
  } catch (err) {
    return { ok: false, error: errorToWire(err) };
  }
}

// The values parsed by `schema`, or the values themselves when there is none. Rejects with the
// first failure.
function conforming(schema: Schema | undefined, values: unknown[]): Promise<unknown[]> {
  return schema === undefined ? Promise.resolve(values) : Promise.all(values.map((value) => parseItem(schema, value)));
}

function logTo(send: (message: LogMessage) => void): WorkerLog {
  const line = (level: LogMessage["level"]) => (msg: string, fields?: Record<string, unknown>) =>
    send(fields === undefined ? { kind: "log", level, msg } : { kind: "log", level, msg, fields });
  return { debug: line("debug"), info: line("info"), warn: line("warn"), error: line("error") };
}

function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
