/**
 * The Worker that serves an ONNX model with onnxruntime-node, batching the rows of concurrent
 * requests into one run.
 */
import { availableParallelism } from "node:os";
import { basename } from "node:path";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { json, msgpack, type Codec } from "../codecs.js";
import { ValidationError } from "../errors.js";
import { ElementBudget } from "../tensor/element-budget.js";
import { isTensorType, TENSOR_TYPES, type TypedArray } from "../tensor/datatypes.js";
import { readFloatTensors, type FloatInputs } from "../tensor/json-floats.js";
import { readTensor } from "../tensor/read-tensor.js";
import { formatShape, isDynamic } from "../tensor/shape.js";
import { concat, sameTensor, split, type TensorSpec, type TensorValue } from "../tensor/tensor.js";
import { tensorsToJson } from "../tensor/tensor-json.js";
import { Worker, type RequestMeta, type WorkerClass } from "../worker.js";
import { inputFault } from "./input-fault.js";

/** How each worker's ONNX Runtime session runs. */
export interface OnnxSessionOptions {
  /**
   * Threads one operator may use, in each worker. Default: `max(1, floor(cores / num))`, so that
   * the stage's `num` workers share the machine's cores instead of fighting over them.
   */
  intraOpThreads?: number;
  /** Threads that run independent operators at once, when `executionMode` is `"parallel"`. Default 1. */
  interOpThreads?: number;
  /** Graph optimisations applied when the model loads. Default `"all"`. */
  graphOptimization?: "disabled" | "basic" | "extended" | "all";
  /** `"sequential"` (default) runs one operator at a time; `"parallel"` runs independent branches together. */
  executionMode?: "sequential" | "parallel";
}

/** Options of {@link onnxWorker}. */
export interface OnnxWorkerOptions extends OnnxSessionOptions {
  /** Path of the `.onnx` file; a relative path is taken from the working directory. */
  model: string;
  /** The class's name, which names the stage (default: the model file's name, e.g. `mlp` for `mlp.onnx`). */
  name?: string;
}

/** One request's tensors, by model input name, or one request's results, by model output name. */
export type Tensors = Record<string, TensorValue>;

/** A request checked against the model: its tensors, and how many rows it carries. */
export interface CheckedRequest {
  feeds: Tensors;
  rows: number;
}

/** The intra-op threads a worker gets by default when its stage runs `num` workers. */
export function defaultIntraOpThreads(num: number): number {
  return Math.max(1, Math.floor(availableParallelism() / num));
}

// A run that fails is the server's to log, as an error when it is its own fault and at debug when
// it is the client's (input-fault.ts): ONNX Runtime's own line on stderr for it is left out.
const QUIET: InferenceSession.RunOptions = { logSeverityLevel: 4 };

const MSGPACK_TYPE = /^\s*application\/(?:x-|vnd\.)?msgpack\s*(?:;|$)/i;

// A request is read, and its response written, in MessagePack when it says it is MessagePack,
// and in JSON otherwise (curl's `-d` sends a form content-type).
function codecFor(meta: RequestMeta | undefined): Codec {
  const type = meta?.headers["content-type"];
  return typeof type === "string" && MSGPACK_TYPE.test(type) ? msgpack : json;
}

/**
 * Serves an ONNX model: each worker loads {@link OnnxWorker.model} in `init()` and reads its
 * inputs' and outputs' names, element types and shapes. A request is an object with one field
 * per input; its response has one field per output.
 *
 * With `maxBatchSize` > 1, the requests of a batch run together: their inputs are stacked along
 * each input's batch axis (its first dynamic dimension, usually axis 0) and the outputs are cut
 * back into each request's rows, so a request of 3 rows gets 3 rows back. Requests that cannot
 * share a run (other sizes in a dynamic non-batch dimension, different values for an input
 * without a batch axis) run in separate runs of the same batch.
 *
 * Requests and responses are JSON, or MessagePack when the request's content-type is
 * `application/msgpack` (plain MessagePack: no extension types). A request that does not fit
 * the model, or holds more elements than the server's `--max-tensor-elements`, is answered 422
 * with the input and what it expects.
 *
 * @example
 * ```ts
 * class Classifier extends OnnxWorker {
 *   override model = "models/classifier.onnx";
 *   override sessionOptions = { graphOptimization: "all" as const };
 * }
 * server.appendWorker(Classifier, { num: 2, maxBatchSize: 32, maxWaitMs: 5 });
 * ```
 */
export class OnnxWorker extends Worker {
  /** Path of the `.onnx` file; a relative path is taken from the working directory. */
  model = "";
  /** How the session runs; see {@link OnnxSessionOptions}. */
  sessionOptions: OnnxSessionOptions = {};
  /** The model's session, once `init()` has run. */
  session!: InferenceSession;
  /** What the model expects of each input, once `init()` has run. */
  inputs: TensorSpec[] = [];
  /** What the model gives for each output, once `init()` has run. */
  outputs: TensorSpec[] = [];
  #Tensor!: typeof Tensor;
  // Whether requests may share a run: some input has a batch axis, and every output has one to
  // cut the results along.
  #stacks = false;
  // The float inputs, when JSON requests go to this class's own forward(): their rows are then read
  // straight into typed arrays. A subclass with its own forward() gets what JSON.parse gives.
  #floatInputs: FloatInputs | undefined;

  /** Loads the model (onnxruntime-node is imported here, so the HTTP thread never loads it). */
  override async init(): Promise<void> {
    if (!this.model) throw new Error(`${this.constructor.name}: set 'model' to the path of an .onnx file`);
    const ort = await import("onnxruntime-node");
    this.#Tensor = ort.Tensor;
    const o = this.sessionOptions;
    const intraOpThreads = o.intraOpThreads ?? defaultIntraOpThreads(this.num);
    try {
      this.session = await ort.InferenceSession.create(this.model, {
        intraOpNumThreads: intraOpThreads,
        interOpNumThreads: o.interOpThreads ?? 1,
        graphOptimizationLevel: o.graphOptimization ?? "all",
        executionMode: o.executionMode ?? "sequential",
      });
    } catch (err) {
      throw new Error(`cannot load the ONNX model ${this.model}: ${(err as Error).message}`);
    }
    this.inputs = this.session.inputMetadata.map((m) => specOf(m, "input"));
    this.outputs = this.session.outputMetadata.map((m) => specOf(m, "output"));
    this.#stacks = this.inputs.some((s) => s.batchAxis !== undefined) && this.outputs.every((s) => s.batchAxis !== undefined);
    this.example ??= zeroExample(this.inputs);
    const floats = this.inputs.filter((s): s is TensorSpec & { type: "float32" | "float64" } => s.type === "float32" || s.type === "float64");
    if (!this.#ownForward() && floats.length > 0) this.#floatInputs = new Map(floats.map((s) => [s.name, s.type]));
    if (this.workerId <= 1) {
      this.log.info(`loaded ${this.model}`, { inputs: signature(this.inputs), outputs: signature(this.outputs), intraOpThreads, batches: this.#stacks });
    }
  }

  /** Reads the request as MessagePack when its content-type says so, as JSON otherwise; a subclass with a `forward()` of its own, with its `codec`. */
  override decode(body: Uint8Array, meta?: RequestMeta): unknown {
    if (this.#ownForward()) return super.decode(body, meta);
    const codec = codecFor(meta);
    if (codec === json && this.#floatInputs !== undefined) {
      const tensors = readFloatTensors(body, this.#floatInputs, this.limits.maxTensorElements);
      if (tensors !== undefined) return tensors;
    }
    return codec.decode(body);
  }

  /**
   * Writes one field per output: nested arrays in JSON (float32 in its shortest digits, see
   * tensor-json.ts); in MessagePack `{ data, shape, type }` with `data` the raw little-endian
   * bytes (`bin`). A subclass with a `forward()` of its own writes its answers with its `codec`.
   */
  override encode(output: unknown, meta?: RequestMeta): Uint8Array {
    if (this.#ownForward()) return super.encode(output, meta);
    const tensors = output as Tensors;
    if (codecFor(meta) !== msgpack) return tensorsToJson(tensors);
    const body: Record<string, unknown> = {};
    for (const [name, tensor] of Object.entries(tensors)) body[name] = { data: tensor.data, shape: tensor.shape, type: tensor.type };
    return msgpack.encode(body);
  }

  /** The response's content-type: the request's format (the `codec`'s, for a `forward()` of a subclass's own). */
  override responseType(meta?: RequestMeta): string {
    return this.#ownForward() ? super.responseType(meta) : codecFor(meta).contentType;
  }

  // Whether a subclass answers with a forward() of its own rather than with tensors by name.
  readonly #ownForward = (): boolean => this.forward !== OnnxWorker.prototype.forward;

  /**
   * Runs one request, or a batch of them when the stage batches. A run of several requests that
   * fails throws (unless the class opts out of {@link Worker.splitFailedBatches}), so that the
   * server runs the batch again in parts to find the request at fault.
   */
  override async forward(data: unknown, _meta: unknown): Promise<unknown> {
    if (this.maxBatchSize > 1) return this.infer(data as unknown[], (this.constructor as WorkerClass).splitFailedBatches !== false);
    const [result] = await this.infer([data]);
    if (result instanceof Error) throw result;
    return result;
  }

  /**
   * Runs the model for several requests, stacking those that fit together into one run. Returns
   * one result per request, in order: its output tensors, or the Error that fails it alone (it
   * does not fit the model, or ONNX Runtime rejected a run of it alone: a 400 that says why when
   * the runtime's error is about the input, see docs/onnx.md). A run of several requests that
   * fails fails each of them with its error, or, with `throwShared`, throws it.
   */
  async infer(requests: readonly unknown[], throwShared = false): Promise<(Tensors | Error)[]> {
    const results: (Tensors | Error)[] = new Array(requests.length);
    const groups: { at: number[]; checked: CheckedRequest[] }[] = [];
    requests.forEach((request, i) => {
      let checked: CheckedRequest;
      try {
        checked = this.check(request);
      } catch (err) {
        results[i] = err as Error;
        return;
      }
      const group = this.#stacks ? groups.find((g) => this.#fit(g.checked[0]!, checked)) : undefined;
      if (group === undefined) groups.push({ at: [i], checked: [checked] });
      else {
        group.at.push(i);
        group.checked.push(checked);
      }
    });
    for (const { at, checked } of groups) {
      let outputs: Tensors[] | Error;
      try {
        outputs = await this.#run(checked);
      } catch (err) {
        if (throwShared && checked.length > 1) throw err;
        outputs = (checked.length === 1 ? inputFault(err, checked[0]!.feeds) : undefined) ?? (err instanceof Error ? err : new Error(String(err)));
      }
      at.forEach((index, j) => (results[index] = outputs instanceof Error ? outputs : outputs[j]!));
    }
    return results;
  }

  /**
   * Checks one request against the model: an object with one field per input, each of the
   * input's element type and shape, all with the same number of rows, and all within the
   * server's `--max-tensor-elements` ({@link Worker.limits}). Throws a {@link ValidationError}
   * that names the input at fault and what it expects.
   */
  check(request: unknown): CheckedRequest {
    if (typeof request !== "object" || request === null || Array.isArray(request) || ArrayBuffer.isView(request)) {
      throw new ValidationError(`expected an object with one field per input: ${signature(this.inputs)}`);
    }
    const fields = request as Record<string, unknown>;
    const unknown = Object.keys(fields).find((key) => !this.inputs.some((s) => s.name === key));
    if (unknown !== undefined) throw new ValidationError(`unknown input '${unknown}'; the model's inputs are ${signature(this.inputs)}`);
    const feeds: Tensors = {};
    let rows: { n: number; from: string } | undefined;
    const budget = new ElementBudget(this.limits);
    for (const spec of this.inputs) {
      if (!(spec.name in fields)) throw new ValidationError(`missing input '${spec.name}' (${spec.type} ${formatShape(spec.shape)})`);
      const tensor = readTensor(spec, fields[spec.name], budget);
      if (spec.batchAxis !== undefined) {
        const n = tensor.shape[spec.batchAxis]!;
        if (rows === undefined) rows = { n, from: spec.name };
        else if (n !== rows.n) {
          throw new ValidationError(`input '${spec.name}' has ${n} rows along axis ${spec.batchAxis} where input '${rows.from}' has ${rows.n}`);
        }
      }
      feeds[spec.name] = tensor;
    }
    return { feeds, rows: rows?.n ?? 1 };
  }

  // Whether two requests can share a run: the same sizes but for the batch axes, and the same
  // values for inputs without one.
  #fit(a: CheckedRequest, b: CheckedRequest): boolean {
    return this.inputs.every(({ name, batchAxis }) => {
      const x = a.feeds[name]!;
      const y = b.feeds[name]!;
      if (batchAxis === undefined) return sameTensor(x, y);
      return x.shape.every((d, i) => i === batchAxis || d === y.shape[i]);
    });
  }

  /**
   * Runs the model once on `feeds`, one tensor per input, as they are: no checks, no batching.
   * For Workers that build their own runs on this one (a recurrent model stepped frame by frame).
   */
  async run(feeds: Tensors): Promise<Tensors> {
    const inputs: Record<string, Tensor> = {};
    for (const [name, { type, data, shape }] of Object.entries(feeds)) inputs[name] = new this.#Tensor(type, data, shape);
    const out = await this.session.run(inputs, QUIET);
    const results: Tensors = {};
    for (const { name, type } of this.outputs) results[name] = { type, shape: [...out[name]!.dims], data: out[name]!.data as TypedArray };
    return results;
  }

  // One run for requests that fit together; each gets its own rows of every output, or the
  // Error that says the model does not keep their rows apart. Rejects when the run fails.
  async #run(checked: readonly CheckedRequest[]): Promise<Tensors[] | Error> {
    const feeds: Tensors = {};
    for (const { name, batchAxis } of this.inputs) {
      const parts = checked.map((c) => c.feeds[name]!);
      feeds[name] = batchAxis === undefined ? parts[0]! : concat(parts, batchAxis);
    }
    const out = await this.run(feeds);
    const rows = checked.map((c) => c.rows);
    const total = rows.reduce((sum, n) => sum + n, 0);
    const results: Tensors[] = checked.map(() => ({}));
    for (const { name, batchAxis } of this.outputs) {
      const tensor = out[name]!;
      const axis = batchAxis ?? 0;
      if (checked.length > 1 && tensor.shape[axis] !== total) {
        return new Error(`output '${name}' has ${tensor.shape[axis]} rows along axis ${axis} for ${total} rows in; serve this model with maxBatchSize 1`);
      }
      split(tensor, axis, rows).forEach((part, j) => (results[j]![name] = part));
    }
    return results;
  }
}

/**
 * A Worker class that serves the ONNX model `options.model` with `options`' session settings,
 * named after the model file (or `options.name`).
 *
 * @example
 * ```ts
 * server.appendWorker(onnxWorker({ model: "mlp.onnx" }), { num: 2, maxBatchSize: 32 });
 * ```
 */
export function onnxWorker({ model, name, ...sessionOptions }: OnnxWorkerOptions): WorkerClass {
  const cls = class extends OnnxWorker {
    override model = model;
    override sessionOptions = sessionOptions;
  };
  const fromFile = basename(model).replace(/\.onnx$/i, "").replace(/[^A-Za-z0-9_]/g, "_");
  Object.defineProperty(cls, "name", { value: name ?? (fromFile || "OnnxModel") });
  return cls;
}

function specOf(meta: InferenceSession.ValueMetadata, kind: "input" | "output"): TensorSpec {
  if (!meta.isTensor) throw new Error(`${kind} '${meta.name}' is not a tensor; shoal/onnx serves tensors only`);
  if (!isTensorType(meta.type)) {
    throw new Error(`${kind} '${meta.name}' has element type ${meta.type}; shoal/onnx serves ${TENSOR_TYPES.join(", ")}`);
  }
  const batchAxis = meta.shape.findIndex(isDynamic);
  return { name: meta.name, type: meta.type, shape: meta.shape, batchAxis: batchAxis < 0 ? undefined : batchAxis };
}

function signature(specs: readonly TensorSpec[]): string {
  return specs.map((s) => `${s.name} (${s.type} ${formatShape(s.shape)})`).join(", ");
}

// A one-row request of zeros, to warm each worker up, when every input's size is fixed but for
// its batch axis. A model with other dynamic sizes gets none: zeros of a made-up size could be
// an input it rejects. It is nested lists, as a client writes a request in JSON, since it is also
// the route's example in /openapi.json (a typed array of int64 has no JSON form).
function zeroExample(inputs: readonly TensorSpec[]): Record<string, unknown> | undefined {
  const example: Record<string, unknown> = {};
  for (const { name, shape, batchAxis } of inputs) {
    const dims = shape.map((d, i) => (i === batchAxis ? 1 : d));
    if (!dims.every((d): d is number => typeof d === "number" && d >= 0)) return undefined;
    example[name] = dims.reduceRight<unknown>((inner, d) => Array.from({ length: d }, () => inner), 0);
  }
  return example;
}
