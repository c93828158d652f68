import { ClientError } from "../errors.js";
import type { ModelInput, ModelOutput, ModelWorker } from "../model-worker.js";
import { checkDeclaredInputs } from "../v2/declared.js";
import { fromOnnxType, toOnnxType } from "../tensor/datatypes.js";
import type { V2InferenceRequest } from "../v2/types.js";
import { OnnxWorker, type Tensors } from "../onnx/onnx-worker.js";
import { isDynamic } from "../tensor/shape.js";
import type { TensorSpec } from "../tensor/tensor.js";
import type { Worker } from "../worker.js";
import type { LoadMessage } from "./messages.js";
import { importServerModule } from "./module-loader.js";
import { speakingV2, type Adapter, type V2Worker } from "./v2-worker.js";

/** The class of a model instance's Worker, by its runtime: OnnxWorker, LlamaWorker, or the class a module exports. */
export async function modelClass(message: LoadMessage): Promise<new () => V2Worker> {
  if (message.runtime === "onnx") return onnxModel(message);
  return message.runtime === "llama" ? llamaModel(message) : moduleModel(message);
}

// A GGUF language model: LlamaWorker takes the prompt of each request and streams its text; a
// batch's requests are generated together, each in a sequence of the worker's context. Loaded
// only for such a model, as it brings zod and node-llama-cpp.
async function llamaModel(message: LoadMessage): Promise<new () => V2Worker> {
  const { LlamaWorker } = await import("../llama/llama-worker.js");
  const { TEXT_INPUT, TEXT_OUTPUT, llamaOptions, textRequestOf, textTensorsOf } = await import("../llama/llama-model.js");
  return speakingV2(LlamaWorker, message, { model: message.file!, options: llamaOptions(message.parameters, message.maxBatchSize) }, (): Adapter => ({
    platform: "llama.cpp",
    inputs: [TEXT_INPUT],
    outputs: [TEXT_OUTPUT],
    toInput: textRequestOf,
    toTensors: (chunk) => textTensorsOf(chunk as import("../text-generation.js").TextChunk),
    unload: () => {},
  }));
}

// An ONNX model: OnnxWorker loads the file and stacks the rows of a batch's requests. Its session
// takes cores / workers threads (its `num` is the pool's size): the pool's workers share the
// machine's cores, whatever model each runs.
function onnxModel(message: LoadMessage): new () => V2Worker {
  return speakingV2(OnnxWorker, message, { model: message.file! }, (onnx): Adapter => ({
    platform: "onnxruntime_onnx",
    inputs: onnx.inputs.map(metadataOf),
    outputs: onnx.outputs.map(metadataOf),
    toInput: (request) => onnxFeeds(onnx, request),
    toTensors: (output) => Object.entries(output as Tensors).map(([name, t]) => ({ name, datatype: fromOnnxType(t.type)!, shape: t.shape, data: t.data })),
    unload: () => void onnx.session.release(),
  }));
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

function metadataOf(spec: TensorSpec) {
  return { name: spec.name, datatype: fromOnnxType(spec.type)!, shape: spec.shape.map((d) => (isDynamic(d) ? -1 : (d as number))) };
}

// A module runtime: its Worker class (the default export, or the only exported Worker class)
// gets the request's tensors by name, checked against the inputs its settings declare if they
// declare any, and returns its outputs by name.
async function moduleModel(message: LoadMessage): Promise<new () => V2Worker> {
  const exports = await importServerModule(message.runtime);
  const found = ("default" in exports ? [exports.default] : Object.values(exports)).filter(isWorkerClass);
  if (found.length !== 1) {
    throw new Error(`${message.runtime} exports ${found.length === 0 ? "no Worker class" : `${found.length} Worker classes`}: export the model's class as the default export`);
  }
  // The fields of ModelWorker, set before init() runs.
  const fields: Pick<ModelWorker, "modelName" | "modelVersion" | "dir" | "parameters"> = {
    modelName: message.name,
    modelVersion: message.version,
    dir: message.dir,
    parameters: message.parameters,
  };
  return speakingV2(found[0]! as new () => ModelWorker, message, fields, (): Adapter => ({
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
  }));
}

function isWorkerClass(value: unknown): value is new () => Worker {
  return typeof value === "function" && typeof (value as { prototype?: { forward?: unknown } }).prototype?.forward === "function";
}
