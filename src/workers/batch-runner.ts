import { errorToWire, ServerError, ValidationError, type ErrorCode, type WireError } from "../errors.js";
import { isFanOut, type FanOut } from "../fan-out.js";
import type { Schema } from "../schema.js";
import { warmUp } from "./warm-up.js";
import type { RequestMeta, Worker, WorkerClass } from "../worker.js";
import { logTo } from "./worker-log.js";
import type { StepWorker } from "../step-worker.js";
import { isAsyncIterable, ItemStream } from "./item-stream.js";
import type { BatchItem, BatchMessage, FlowMessage, FromWorker, ItemResult, ReadyMessage, ResultMessage, RunnerIdentity } from "./messages.js";
import { countError, splitBatch } from "./batch-split.js";
import { StepScheduler } from "./step-scheduler.js";
import { exclusive, transferablesOf } from "./transfer.js";
import { decodeV2Item, v2Answer, type V2Carried, type V2Reply } from "./v2-route.js";

/** How a runner sends its coordinator a message that is not a batch's result, moving `transfer`. */
export type Send = (message: FromWorker, transfer?: ArrayBuffer[]) => void;

/** A result message and the buffers it moves. */
export interface Outgoing {
  message: ResultMessage;
  transfer: ArrayBuffer[];
}

/**
 * What a runner answers where a model served with the V2 protocol differs from a stage: the code of an
 * undecodable request (when what was thrown is not a Shoal error), and the error of an item `forward()` failed.
 */
export interface Failures {
  /** A stage's is DECODING. */
  undecodable: ErrorCode;
  /** A stage answers the error as it is. */
  failedItem(error: WireError): WireError;
}

const STAGE_FAILURES: Failures = { undecodable: "DECODING", failedItem: (error) => error };

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
  readonly #streams: boolean;
  // Set for a StepWorker: its forward() is the scheduler's.
  readonly #steps: StepScheduler | undefined;
  // The streams of each batch under way, by sequence number, at their items' indexes.
  readonly #open = new Map<number, ItemStream[]>();
  readonly #stage: boolean;
  // Whether a batch that forward() fails as a whole runs again in parts (batch-split.ts).
  readonly #splits: boolean;
  // The first warm-up example as forward() received it (parsed), for --dry-run.
  #example: unknown;
  #stopReports: (() => void) | undefined;

  private constructor(
    readonly worker: W,
    readonly boot: RunnerIdentity,
    readonly failures: Failures,
    readonly send: Send,
  ) {
    const cls = worker.constructor as WorkerClass;
    // A stage's runner; a model's Worker speaks V2 in its own decode and encode.
    this.#stage = failures === STAGE_FAILURES;
    this.#input = cls.input;
    this.#output = cls.output;
    this.#batched = cls.batched;
    this.#streams = cls.streaming !== false && cls.streaming !== undefined;
    this.#steps = cls.stepwise === true ? new StepScheduler(worker as unknown as StepWorker) : undefined;
    // A StepWorker's sequences fail one by one already; a stage that does not batch runs items alone.
    this.#splits = cls.splitFailedBatches !== false && this.#steps === undefined && boot.maxBatchSize > 1;
  }

  /**
   * Constructs the Worker, gives it its identity and log, runs its `init()` and its warm-up
   * examples, and starts reporting its metrics through `send`. `failures` are a stage's unless
   * given.
   */
  static async start<W extends Worker>(cls: new () => W, boot: RunnerIdentity, send: Send, failures = STAGE_FAILURES): Promise<BatchRunner<W>> {
    const declared = cls as unknown as WorkerClass;
    if (declared.input !== undefined || declared.output !== undefined) await schemaTools();
    const worker = new cls();
    worker.workerId = boot.workerId;
    worker.stage = boot.stageName;
    worker.maxBatchSize = boot.maxBatchSize;
    worker.num = boot.num;
    worker.limits = boot.limits;
    worker.log = logTo(send);
    await worker.init();
    const runner = new BatchRunner(worker, boot, failures, send);
    await runner.#warmUp();
    runner.#stopReports = worker.metrics.report((metrics) => send({ kind: "metrics", metrics }));
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
      const { toJsonSchema } = schemaModule!;
      if (this.#input !== undefined) message.schemas.input = toJsonSchema(this.#input, "input");
      if (this.#output !== undefined) message.schemas.output = toJsonSchema(this.#output, "output");
    }
    return message;
  }

  // The declared examples through forward() before the worker takes work (warm-up.ts).
  async #warmUp(): Promise<void> {
    const { worker, boot } = this;
    const examples = worker.examples ?? (worker.example === undefined ? [] : [worker.example]);
    this.#example = await warmUp(examples, boot, { input: this.#input, output: this.#output }, (inputs, metas) => this.#forward(inputs, metas));
  }

  /** Stops reporting the Worker's metrics, when the runner is dropped (a model unloaded). */
  stop(): void {
    this.#stopReports?.();
  }

  async run(batch: BatchMessage): Promise<Outgoing> {
    if (batch.traced !== true) return this.#run(batch);
    // A traced batch: what the Worker records of it goes back with its result.
    const { trace } = this.worker;
    trace.begin();
    try {
      const outgoing = await this.#run(batch);
      const report = trace.finish();
      if (report !== undefined) outgoing.message.trace = report;
      return outgoing;
    } finally {
      trace.finish();
    }
  }

  async #run(batch: BatchMessage): Promise<Outgoing> {
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
      // A V2 request for a route says so in its meta (the door that found the model set it).
      if (this.#stage && item.meta.v2 !== undefined) ({ v2Reply: reply, value } = value as V2Carried);
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
    // Runs made again to split a batch that forward() failed as a whole.
    let retries = 0;
    if (inputs.length > 0) {
      const streams = this.#streams ? this.#openStreams(seq, metas, positions) : undefined;
      let outputs: unknown[];
      try {
        outputs = await this.#forward(inputs, metas);
      } catch (err) {
        if (!this.#splits || inputs.length < 2) {
          this.#open.delete(seq);
          return { message: { kind: "result", seq, error: errorToWire(err) }, transfer: [] };
        }
        ({ outputs, runs: retries } = await splitBatch((part, partMetas) => this.worker.forward(part, partMetas), inputs, metas));
      }
      if (!Array.isArray(outputs) || outputs.length !== inputs.length) {
        this.#open.delete(seq);
        const error: WireError = { code: "INTERNAL", message: "", stack: `${this.boot.stageName} worker ${this.boot.workerId}: ${countError(outputs, inputs.length)}` };
        return { message: { kind: "result", seq, error }, transfer: [] };
      }
      const pending: Promise<void>[] = [];
      for (let j = 0; j < outputs.length; j++) {
        const at = positions[j]!;
        const output = outputs[j];
        if (streams !== undefined && isAsyncIterable(output)) pending.push(this.#pour(output, streams[at]!, seq, at, items[at]!, transfer, replies[j]).then((result) => void (results[at] = result)));
        else results[at] = this.#finish(output, items[at]!, transfer, replies[j]);
      }
      if (pending.length > 0) await Promise.all(pending);
      this.#open.delete(seq);
    }
    const message: ResultMessage = { kind: "result", seq, results };
    if (retries > 0) message.retries = retries;
    return { message, transfer: [...transfer] };
  }

  /** Applies the coordinator's word on one stream; false when this runner does not hold its batch. */
  flow({ seq, index, action }: FlowMessage): boolean {
    const streams = this.#open.get(seq);
    streams?.[index]?.flow(action);
    return streams !== undefined;
  }

  /** Sequences a StepWorker is generating now. */
  get activeSequences(): number {
    return this.#steps?.active ?? 0;
  }

  // A stream for each item forward() will see, its signal in the item's meta.
  #openStreams(seq: number, metas: RequestMeta[], positions: number[]): ItemStream[] {
    const streams: ItemStream[] = [];
    for (let j = 0; j < metas.length; j++) {
      const stream = new ItemStream();
      (metas[j] as { signal?: AbortSignal }).signal = stream.signal;
      streams[positions[j]!] = stream;
    }
    this.#open.set(seq, streams);
    return streams;
  }

  // One streamed item: its chunks go to the coordinator as they come when its client takes a
  // stream (the item's result is then a placeholder), or are gathered into its one result.
  async #pour(source: AsyncIterable<unknown>, stream: ItemStream, seq: number, index: number, item: BatchItem, transfer: Set<ArrayBuffer>, reply: V2Reply | undefined): Promise<ItemResult> {
    const { worker } = this;
    if (item.stream !== true) {
      const chunks: unknown[] = [];
      let value: unknown;
      try {
        value = (await stream.drain(source, (chunk) => chunks.push(chunk))) ? worker.gather(chunks, item.meta) : new Error("cancelled");
      } catch (err) {
        value = err instanceof Error ? err : new Error(String(err));
      }
      return this.#finish(value, item, transfer, reply);
    }
    try {
      const ended = await stream.drain(source, (chunk) => {
        const bytes = exclusive(worker.encode(chunk, item.meta));
        this.send({ kind: "stream", seq, index, chunk: bytes }, bytes.byteLength > 0 ? [bytes.buffer as ArrayBuffer] : []);
      });
      if (ended) this.send({ kind: "stream", seq, index, end: true });
    } catch (err) {
      if (!stream.signal.aborted) this.send({ kind: "stream", seq, index, end: true, error: this.failures.failedItem(errorToWire(err)) });
    }
    return { ok: true, value: null };
  }

  #decode(item: BatchItem): ItemResult {
    try {
      if (this.#stage && item.meta.v2 !== undefined) {
        const { item: value, reply } = decodeV2Item(item.payload as Parameters<typeof decodeV2Item>[0], item.meta, this.boot.limits);
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
    if (this.#steps !== undefined) return this.#steps.join(inputs, metas);
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
    if (isFanOut(output)) return this.#fannedOut(output, egress, transfer);
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

  // The sub-items' values go to the coordinator, which makes each a task of its own (and finds
  // each one's buffers to move on). A route's last stage has no next stage to fan out to. The
  // bound is kept here, so that a fan-out past it is never posted (its count comes from the input).
  #fannedOut({ values }: FanOut, egress: boolean, transfer: Set<ArrayBuffer>): ItemResult {
    const { stageName, maxFanOut } = this.boot;
    if (egress) return { ok: false, error: errorToWire(new ServerError(`stage ${stageName} returned fanOut() at its route's last stage; only a stage followed by others fans out`)) };
    if (maxFanOut === undefined) return { ok: false, error: errorToWire(new ServerError(`stage ${stageName} returned fanOut() but declares no fanOut option`)) };
    if (values.length > maxFanOut) return { ok: false, error: errorToWire(new ValidationError(`stage ${stageName} made ${values.length} sub-items of one item, more than its limit of ${maxFanOut} (fanOut.max)`)) };
    transferablesOf(values, transfer);
    return { ok: true, value: values, fanOut: true };
  }
}

// The schema tools (and zod) are loaded only for a Worker class that declares schemas (its module has loaded zod already).
let schemaModule: typeof import("../schema.js") | undefined;
const schemaTools = async () => (schemaModule ??= await import("../schema.js"));

// The result of a batch of one, from a Worker that computes batches.
function onlyResult(outputs: unknown): unknown {
  if (!Array.isArray(outputs) || outputs.length !== 1) throw new Error(countError(outputs, 1));
  return outputs[0];
}

// A decoded request parsed by the input schema. A ValidationError is the client's 422; anything
// else thrown (a refinement with a bug) is a 500 whose stack is logged.
async function validate(schema: Schema, value: unknown): Promise<ItemResult> {
  try {
    return { ok: true, value: await schemaModule!.parseItem(schema, value) };
  } catch (err) {
    return { ok: false, error: errorToWire(err) };
  }
}
