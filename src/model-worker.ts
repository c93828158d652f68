import type { V2Datatype, V2Tensor } from "./v2/types.js";
import { Worker } from "./worker.js";

/** One inference request as a model's `forward()` receives it. */
export interface ModelInput {
  /** The request's input tensors, by name. */
  inputs: Record<string, V2Tensor>;
  /** The request's `parameters` (empty when it has none). */
  parameters: Record<string, unknown>;
  /** The outputs the client asked for, by name; undefined for all of them. */
  outputs: string[] | undefined;
}

/** One output tensor as `forward()` returns it: its name is the key it is returned under. */
export interface ModelTensor {
  datatype: V2Datatype;
  shape: number[];
  data: V2Tensor["data"];
}

/** What `forward()` returns for one request: its output tensors, by name. */
export type ModelOutput = Record<string, ModelTensor>;

/**
 * One request's result: its outputs, or, from a model whose class sets `static streaming`, an
 * async iterable of them (each one V2 response of its stream, for `/infer_stream` and
 * `/generate_stream`; joined along the first dimension for a client that takes one answer).
 */
export type ModelResult = ModelOutput | AsyncIterable<ModelOutput>;

/**
 * The Worker of a model served with the V2 protocol from a model repository (a module named
 * by `runtime` in `model-settings.json`). Each worker of the shared pool that loads the model
 * builds one, sets the fields below, then runs `init()`.
 *
 * `forward()` receives one {@link ModelInput} (or, when the model's `maxBatchSize` > 1, an array
 * of them) and returns one {@link ModelOutput} per request, or in a batch an `Error` that fails
 * only its request. BYTES tensors hold `Uint8Array` elements. Throw a `ClientError` (400) or
 * `ValidationError` (422) to reject a request.
 *
 * When the model's settings declare `inputs`, every request is checked against them before
 * `forward()` sees it: only declared names, each with its declared datatype, rank and fixed
 * dimensions (-1: any size), and every declared input given; anything else is answered 400 with
 * the input's name. Requests also stay within the server's `--max-tensor-elements` and
 * `--max-bytes-elements`.
 *
 * @example
 * ```ts
 * // models/upper/upper.ts, with "runtime": "./upper.ts" in models/upper/model-settings.json
 * export default class Upper extends ModelWorker {
 *   forward({ inputs }: ModelInput): ModelOutput {
 *     const text = inputs.text!;
 *     const data = (text.data as Uint8Array[]).map((b) => new TextEncoder().encode(new TextDecoder().decode(b).toUpperCase()));
 *     return { upper: { datatype: "BYTES", shape: text.shape, data } };
 *   }
 * }
 * ```
 */
export abstract class ModelWorker extends Worker {
  /** The model's name. */
  modelName = "";
  /** The version being loaded ("" when unversioned). */
  modelVersion = "";
  /** The version's folder, where the model's files are. */
  dir = "";
  /** The `parameters` of the model's settings. */
  parameters: Record<string, unknown> = {};

  abstract override forward(data: ModelInput | ModelInput[], meta: unknown): ModelResult | (ModelResult | Error)[] | Promise<ModelResult | (ModelResult | Error)[]>;
}
