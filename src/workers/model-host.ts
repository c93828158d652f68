import { ClientError, errorToWire, type WireError } from "../errors.js";
import type { ModelInput, ModelOutput, ModelWorker } from "../models/model-worker.js";
import { OnnxWorker, type Tensors } from "../onnx/onnx-worker.js";
import { fromOnnxType, toOnnxType } from "../tensor/datatypes.js";
import { isDynamic } from "../tensor/shape.js";
import type { TensorSpec } from "../tensor/tensor.js";
import { checkDeclaredInputs } from "../v2/declared.js";
import { decodeInferenceRequest, encodeInferenceResponse } from "../v2/index.js";
import type { TensorMetadata, V2InferenceRequest, V2Tensor } from "../v2/types.js";
import type { WorkerClass } from "../worker.js";
import type { BatchItem, BatchMessage, FromWorker, ItemResult, LoadMessage, RequestLimits, ResultMessage, ToWorker } from "./messages.js";
import { importServerModule } from "./module-loader.js";
import { WorkerRuntime } from "./runtime.js";
import { transferablesOf } from "./transfer.js";

/** What a model host sends back for one message. */
type Reply = { message: FromWorker; transfer: ArrayBuffer[] };

/** How a loaded model turns V2 requests into its Worker's input, and its output into V2 tensors. */
interface Adapter {
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
  toInput(request: V2InferenceRequest): unknown;
  toTensors(output: unknown): V2Tensor[];
  unload(): void;
}

/** One model instance loaded on this worker. */
interface Loaded {
  name: string;
  version: string;
  runtime: WorkerRuntime;
  adapter: Adapter;
}

const HEADER_LENGTH = "inference-header-content-length";

/**
 * The worker side of the shared pool: loads and unloads model instances on the coordinator's
 * word, and runs each batch on the instance it names as decode (V2 request bytes) → the model's
 * Worker → encode (V2 response bytes). Each instance is a {@link WorkerRuntime} of its own, so
 * it batches, warms up and fails per item exactly as a stage's Worker does.
 */
export class ModelHost {
  readonly #models = new Map<string, Loaded>();
  /** Instances unloaded while they were still loading: dropped as soon as they are loaded. */
  readonly #cancelled = new Set<string>();

  constructor(
    readonly workerId: number,
    readonly limits: RequestLimits,
    readonly send: (message: FromWorker) => void,
  ) {}

  /** Handles one message from the coordinator; a batch's result is returned to be posted. */
  async receive(message: ToWorker): Promise<Reply | undefined> {
    switch (message.kind) {
      case "load":
        return { message: await this.#load(message), transfer: [] };
      case "unload": {
        const loaded = this.#models.get(message.model);
        if (loaded === undefined) this.#cancelled.add(message.model);
        loaded?.runtime.stop();
        loaded?.adapter.unload();
        this.#models.delete(message.model);
        return undefined;
      }
      case "batch":
        return this.#run(message);
    }
  }

  async #load(message: LoadMessage): Promise<FromWorker> {
    try {
      const boot = { moduleUrl: message.runtime, stageIndex: -1, stageName: message.model, className: "", workerId: this.workerId, maxBatchSize: message.maxBatchSize, num: message.workers, limits: this.limits };
      const { cls, adapter } = message.runtime === "onnx" ? onnxModel(message) : await moduleModel(message);
      // The Worker's own metrics are labelled with its model, which shares the worker with others.
      const label = message.version === "" ? message.name : `${message.name}/${message.version}`;
      const runtime = await WorkerRuntime.start(cls, boot, (m) => this.send(m.kind === "metrics" ? { ...m, model: label } : m));
      const ready = adapter(runtime.worker);
      if (this.#cancelled.delete(message.model)) {
        runtime.stop();
        ready.unload();
      } else {
        this.#models.set(message.model, { name: message.name, version: message.version, runtime, adapter: ready });
      }
      return { kind: "loaded", model: message.model, platform: ready.platform, inputs: ready.inputs, outputs: ready.outputs };
    } catch (err) {
      this.#cancelled.delete(message.model);
      return { kind: "loadFailed", model: message.model, error: errorToWire(err, "SERVER") };
    }
  }

  async #run(batch: BatchMessage): Promise<Reply> {
    const { seq, items } = batch;
    const model = this.#models.get(batch.model ?? "");
    if (model === undefined) {
      const error: WireError = { code: "NOT_READY", message: `model instance ${batch.model} is not loaded on worker ${this.workerId}` };
      return { message: { kind: "result", seq, error }, transfer: [] };
    }
    const results: ItemResult[] = new Array(items.length);
    const requests: V2InferenceRequest[] = [];
    const inner: BatchItem[] = [];
    const positions: number[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      try {
        const request = decodeInferenceRequest(item.payload as Uint8Array, headerLength(item), this.limits);
        inner.push({ payload: model.adapter.toInput(request), ingress: false, egress: false, meta: item.meta });
        requests.push(request);
        positions.push(i);
      } catch (err) {
        results[i] = { ok: false, error: errorToWire(err, "BAD_REQUEST") };
      }
    }
    const transfer = new Set<ArrayBuffer>();
    if (inner.length > 0) {
      const { message } = await model.runtime.run({ kind: "batch", seq, items: inner });
      if (message.error !== undefined) return { message, transfer: [] };
      message.results!.forEach((result, j) => {
        results[positions[j]!] = result.ok ? this.#encode(model, requests[j]!, result.value, transfer) : asBadRequest(result.error);
      });
    }
    const message: ResultMessage = { kind: "result", seq, results };
    return { message, transfer: [...transfer] };
  }

  #encode(model: Loaded, request: V2InferenceRequest, output: unknown, transfer: Set<ArrayBuffer>): ItemResult {
    try {
      // The codec keeps the outputs the request names, in its order, and refuses unknown names.
      const outputs = model.adapter.toTensors(output);
      const response = { model_name: model.name, outputs, ...(model.version === "" ? {} : { model_version: model.version }), ...(request.id === undefined ? {} : { id: request.id }) };
      const encoded = encodeInferenceResponse(response, request);
      for (const buffer of transferablesOf(encoded.body)) transfer.add(buffer);
      const result: ItemResult = { ok: true, value: encoded.body, contentType: encoded.contentType };
      if (encoded.headerLength !== undefined) result.headers = { [HEADER_LENGTH]: String(encoded.headerLength) };
      return result;
    } catch (err) {
      return { ok: false, error: errorToWire(err, "ENCODING") };
    }
  }
}

// The V2 protocol answers a request that does not fit the model (a shape, a missing input) with
// 400, where a stage's Worker would say 422.
function asBadRequest(error: WireError): ItemResult {
  return { ok: false, error: error.code === "VALIDATION" ? { ...error, code: "BAD_REQUEST" } : error };
}

// The codec checks the header's value; a header sent twice is not a length.
function headerLength(item: BatchItem): string | undefined {
  const value = item.meta.headers[HEADER_LENGTH];
  if (Array.isArray(value)) throw new ClientError(`${HEADER_LENGTH} is given ${value.length} times`);
  return value;
}

type Built = { cls: WorkerClass; adapter: (worker: unknown) => Adapter };

// An ONNX model: OnnxWorker loads the file and stacks the rows of a batch's requests.
function onnxModel(message: LoadMessage): Built {
  // Its session takes cores / workers threads (its `num` is the pool's size): the pool's workers
  // share the machine's cores, whatever model each runs.
  const cls = class extends OnnxWorker {
    override model = message.file!;
  };
  const adapter = (worker: unknown): Adapter => {
    const onnx = worker as OnnxWorker;
    return {
      platform: "onnxruntime_onnx",
      inputs: onnx.inputs.map(metadataOf),
      outputs: onnx.outputs.map(metadataOf),
      toInput: (request) => onnxFeeds(onnx, request),
      toTensors: (output) => Object.entries(output as Tensors).map(([name, t]) => ({ name, datatype: fromOnnxType(t.type)!, shape: t.shape, data: t.data })),
      unload: () => void onnx.session.release(),
    };
  };
  return { cls, adapter };
}

// A request's tensors as OnnxWorker reads them, once each datatype is checked against the model.
function onnxFeeds(worker: OnnxWorker, request: V2InferenceRequest): Record<string, unknown> {
  const feeds: Record<string, unknown> = {};
  for (const tensor of request.inputs) {
    const spec = worker.inputs.find((s) => s.name === tensor.name);
    if (spec !== undefined && toOnnxType(tensor.datatype) !== spec.type) {
      throw new ClientError(`input '${tensor.name}' is ${tensor.datatype}; the model takes ${fromOnnxType(spec.type)}`);
    }
    feeds[tensor.name] = { data: tensor.data, shape: tensor.shape };
  }
  return feeds;
}

function metadataOf(spec: TensorSpec): TensorMetadata {
  return { name: spec.name, datatype: fromOnnxType(spec.type)!, shape: spec.shape.map((d) => (isDynamic(d) ? -1 : (d as number))) };
}

// A module runtime: its Worker class (the default export, or the only exported Worker class)
// gets the request's tensors by name, checked against the inputs its settings declare if they
// declare any, and returns its outputs by name.
async function moduleModel(message: LoadMessage): Promise<Built> {
  const exports = await importServerModule(message.runtime);
  const found = ("default" in exports ? [exports.default] : Object.values(exports)).filter(isWorkerClass);
  if (found.length !== 1) {
    throw new Error(`${message.runtime} exports ${found.length === 0 ? "no Worker class" : `${found.length} Worker classes`}: export the model's class as the default export`);
  }
  // The fields of ModelWorker, set before init() runs.
  const base = found[0]! as unknown as new () => object;
  const cls = class extends base implements Pick<ModelWorker, "modelName" | "modelVersion" | "dir" | "parameters"> {
    modelName = message.name;
    modelVersion = message.version;
    dir = message.dir;
    parameters = message.parameters;
  };
  Object.defineProperty(cls, "name", { value: base.name });
  const adapter = (): Adapter => ({
    platform: "shoal",
    inputs: message.inputs ?? [],
    outputs: message.outputs ?? [],
    toInput: (request): ModelInput => {
      if (message.inputs !== undefined) checkDeclaredInputs(request.inputs, message.inputs);
      return {
        inputs: Object.fromEntries(request.inputs.map((t) => [t.name, t])),
        parameters: request.parameters ?? {},
        outputs: request.outputs?.map((o) => o.name),
      };
    },
    toTensors: (output) => {
      if (typeof output !== "object" || output === null) throw new Error(`forward() returned ${typeof output}; a model returns its output tensors by name`);
      return Object.entries(output as ModelOutput).map(([name, t]) => ({ name, datatype: t.datatype, shape: t.shape, data: t.data }));
    },
    unload: () => {},
  });
  return { cls: cls as unknown as WorkerClass, adapter };
}

function isWorkerClass(value: unknown): value is WorkerClass {
  return typeof value === "function" && typeof (value as { prototype?: { forward?: unknown } }).prototype?.forward === "function";
}
