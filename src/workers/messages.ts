/**
 * Every message between the coordinator and a worker, in one place for both ends. Threads carry
 * them over a MessagePort with structured clone; buffers listed in a transfer list move
 * without a copy. Processes carry them in the frames of wire.ts (see docs/protocol.md).
 */
import type { WireError } from "../errors.js";
import type { RequestLimits } from "../limits.js";
import type { WorkerMetricsReport } from "../metrics/registry.js";
import type { WorkerTraceReport } from "../metrics/worker-trace.js";
import type { JsonSchema } from "../schema.js";
import type { StreamPolicy } from "../stage-options.js";
import type { TensorMetadata } from "../v2/types.js";
import type { RequestMeta } from "../worker.js";

export type { RequestLimits };

/** What every worker is told when it is spawned. */
interface BootCommon {
  /** 1..num within its stage or pool; a replacement keeps the id of the worker it replaces. */
  workerId: number;
  /** How many workers the stage or pool runs. */
  num: number;
  /** Bounds on what one request may make the worker allocate, from the server's flags. */
  limits: RequestLimits;
}

/** A worker of a stage: it imports the server's module and runs the stage's Worker. */
export interface StageBoot extends BootCommon {
  host?: undefined;
  /** URL of the module that registers the stages (the server's main module). */
  moduleUrl: string;
  /** Index of the stage among the server's `appendWorker()` calls. */
  stageIndex: number;
  stageName: string;
  /** Name of the Worker class expected at that index, to catch modules that register differently. */
  className: string;
  maxBatchSize: number;
  /** The most sub-items one item may fan out to (`fanOut.max`); none when the stage does not fan out. */
  maxFanOut?: number;
}

/** Who runs the batches: a stage's worker, or one model instance on a worker of the shared pool (named by its instance). */
export type RunnerIdentity = Pick<StageBoot, "workerId" | "stageName" | "maxBatchSize" | "maxFanOut" | "num" | "limits">;

/** A worker of the shared pool: it loads, unloads and runs models as it is told. */
export interface HostBoot extends BootCommon {
  host: true;
}

/** What a worker needs to know to start, given when it is spawned. */
export type WorkerBoot = StageBoot | HostBoot;

/**
 * Coordinator to a process worker, first thing on its socket: what a thread gets as its
 * `workerData`.
 */
export type BootMessage = WorkerBoot & { kind: "boot" };

/** One item of a batch, coordinator to worker. */
export interface BatchItem {
  /** Request bytes when `ingress`, otherwise the previous stage's output. */
  payload: unknown;
  /** Decode `payload` with the Worker's codec first. */
  ingress: boolean;
  /** Encode the result with the Worker's codec. */
  egress: boolean;
  /**
   * Set on an egress item whose client takes a stream: a Worker that streams sends each chunk
   * as it comes (`stream` messages) instead of gathering them into one result.
   */
  stream?: true;
  meta: RequestMeta;
}

/** Coordinator to worker: run `forward()` on these items. */
export interface BatchMessage {
  kind: "batch";
  seq: number;
  items: BatchItem[];
  /** On a model host: the loaded model instance the items are for. */
  model?: string;
  /** Set when tracing samples one of its requests: the Worker's own spans are recorded. */
  traced?: true;
}

/** Coordinator to a model host: load a model instance; the answer is `loaded` or `loadFailed`. */
export interface LoadMessage {
  kind: "load";
  /** The instance's key, unique in the pool: batches and unloads name it. */
  model: string;
  name: string;
  /** "" when unversioned. */
  version: string;
  /** `"onnx"`, `"llama"`, `"python"`, `"mlserver"`, or the URL of a module that exports a Worker class. */
  runtime: string;
  /** The version's folder. */
  dir: string;
  /** The model file, for the ONNX and llama.cpp runtimes. */
  file?: string;
  /** The class a Python runtime runs (`"python"`: `/abs/model.py:Class`; `"mlserver"`: the `MLModel` subclass's import path). */
  class?: string;
  /** For `"mlserver"`: its settings file as written, which the `mlserver` package reads. */
  mlserver?: Record<string, unknown>;
  maxBatchSize: number;
  /** How many models may share the worker's cores (threads each ONNX session takes). */
  workers: number;
  parameters: Record<string, unknown>;
  /** Declared metadata, for a module runtime. */
  inputs?: TensorMetadata[];
  outputs?: TensorMetadata[];
}

/**
 * Coordinator to worker: what to do with the stream of one item of a batch it holds. `cancel`:
 * the client is gone or its deadline passed (the item's `meta.signal` aborts, and no more of it
 * is sent); `pause` and `resume`: its client reads slower than it is written.
 */
export interface FlowMessage {
  kind: "flow";
  seq: number;
  /** The item's index in the batch. */
  index: number;
  action: "cancel" | "pause" | "resume";
}

/** Coordinator to a model host: drop a model instance. No answer. */
export interface UnloadMessage {
  kind: "unload";
  model: string;
}

/**
 * Coordinator to worker: end once the work under way has finished. The worker answers `stopping`
 * at once, then exits.
 */
export interface StopMessage {
  kind: "stop";
}

/** Worker to coordinator: a `stop` was read; the worker exits when its work under way is done. */
export interface StoppingMessage {
  kind: "stopping";
}

/** Model host to coordinator: the instance is loaded, with the V2 metadata of its tensors. */
export interface LoadedMessage {
  kind: "loaded";
  model: string;
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
  /** Set when its Worker streams: how its streams wait for a slow client. */
  stream?: StreamPolicy;
  /** The version of the package its runtime runs on, where the runtime says (the mlserver package's). */
  runtimeVersion?: string;
  /** An MLServer model's custom handlers (`@custom_handler`): the REST path and method of each, and its method's name. */
  handlers?: CustomHandler[];
  /** The model's metadata as its runtime gives it, answered as it is: an MLServer model's `metadata()` (its settings' free-form `versions`, `parameters`). */
  answer?: Record<string, unknown>;
}

/** A custom handler of an MLServer model: its REST path and method (upper case), and its method's name. */
export interface CustomHandler {
  path: string;
  method: string;
  name: string;
}

/** Model host to coordinator: the instance could not load; only this model fails. */
export interface LoadFailedMessage {
  kind: "loadFailed";
  model: string;
  error: WireError;
}

/**
 * The outcome of one item. An egress success carries bytes, and their content-type when it is
 * not the worker's usual one, and response headers of its own if any; an inner success carries
 * the value itself, or, with `fanOut`, the array of the values of the sub-items it fanned out to.
 */
export type ItemResult =
  | { ok: true; value: unknown; transfer?: ArrayBuffer[]; contentType?: string; headers?: Record<string, string>; fanOut?: true }
  | { ok: false; error: WireError };

/** Worker to coordinator: the worker has run `init()` and its warm-up, and takes work. */
export interface ReadyMessage {
  kind: "ready";
  /** Content-type of what this worker encodes. */
  contentType: string;
  /** The Worker's first warm-up example, if it declares any (used by `--dry-run`). */
  example?: unknown;
  /** JSON Schemas of one input item and one output item, as far as the Worker declares them (for `/openapi.json`). */
  schemas?: { input?: JsonSchema; output?: JsonSchema };
}

/** Worker to coordinator: the batch `seq` is done; either one result per item or one error for all. */
export interface ResultMessage {
  kind: "result";
  seq: number;
  results?: ItemResult[];
  error?: WireError;
  /** Set when `forward()` failed the batch as a whole and its parts ran again: how many runs that took. */
  retries?: number;
  /** What the Worker recorded of a traced batch. */
  trace?: WorkerTraceReport;
}

/**
 * Worker to coordinator: a chunk of the stream of item `index` of batch `seq` (the bytes its
 * Worker encoded), or the stream's end: `end`, with `error` if it failed after it started. Only
 * items sent with `stream` stream; the batch's `result` follows once every stream has ended
 * (the streamed items' results there are placeholders).
 */
export interface StreamMessage {
  kind: "stream";
  seq: number;
  index: number;
  chunk?: Uint8Array;
  end?: true;
  error?: WireError;
}

/** Worker to coordinator: a line for the server's log. */
export interface LogMessage {
  kind: "log";
  level: "debug" | "info" | "warn" | "error";
  msg: string;
  fields?: Record<string, unknown>;
}

/** Worker to coordinator: the latest values of the Worker's own metrics. */
export interface MetricsMessage {
  kind: "metrics";
  metrics: WorkerMetricsReport;
  /** On a model host: the model (`name` or `name/version`) whose Worker made them. */
  model?: string;
}

/** Worker to coordinator: the worker cannot start (module, class or `init()` failed). */
export interface FatalMessage {
  kind: "fatal";
  error: WireError;
}

export type ToWorker = BatchMessage | FlowMessage | LoadMessage | UnloadMessage | StopMessage;
export type FromWorker = ReadyMessage | ResultMessage | StreamMessage | LogMessage | MetricsMessage | FatalMessage | LoadedMessage | LoadFailedMessage | StoppingMessage;
