import { resolve } from "node:path";
import type { AddressInfo } from "node:net";
import { loadConfig, type ServerConfig } from "../config.js";
import { createLogger } from "../logger.js";
import type { ModelSources } from "../models/catalog.js";
import { parseSettings, type ModelSettingsInput } from "../models/settings.js";
import { checkRouteModel, type RouteModelOptions } from "../serving/route-model.js";
import { resolveStageOptions, type StageOptions } from "../stage-options.js";
import { pythonLaunch } from "../python.js";
import type { WorkerClass } from "../worker.js";
import { workerContext } from "../workers/context.js";
import type { OpenAIModel } from "./apis.js";
import type { Declared, StageSpec } from "./assembly.js";

/** Settings given in code: defaults that CLI flags and `SHOAL_*` variables override. */
export type ServerOptions = Partial<ServerConfig>;

/**
 * Serves Workers over HTTP. Append stages with {@link Server.appendWorker}, add models served
 * with the V2 protocol on one shared pool of workers with {@link Server.addModel} and
 * {@link Server.addModelRepository} (or `--model-repository`), then call {@link Server.run}.
 *
 * Workers run in worker threads (or child processes, with the stage option `isolation:
 * "process"`) that import the server's main module again to find their class (as Node's
 * cluster does): keep `appendWorker()` calls at the module's top level, and
 * expect other top-level code to run once per worker too. Inside a worker, `run()` does nothing.
 *
 * @example
 * ```ts
 * const server = new Server();
 * server.appendWorker(Preprocess, { num: 2 });
 * server.appendWorker(Model, { maxBatchSize: 16, maxWaitMs: 5 });
 * await server.run();
 * ```
 */
export class Server {
  readonly #defaults: ServerOptions;
  readonly #specs: StageSpec[] = [];
  readonly #models: ModelSources = { repositories: [], models: [] };
  readonly #openAI = new Map<string, OpenAIModel>();
  readonly #routeModels: { route: string; options: RouteModelOptions }[] = [];

  constructor(defaults: ServerOptions = {}) {
    this.#defaults = defaults;
  }

  /**
   * Appends a stage running `worker` to the pipeline of each of its routes (`/inference` by
   * default). A stage given several routes is one shared stage: one pool, and batches that mix
   * requests of all its routes. Throws a `TypeError` naming the option on invalid options.
   */
  appendWorker(worker: WorkerClass, options: StageOptions = {}): this {
    if (typeof worker !== "function" || typeof worker.prototype?.forward !== "function") {
      throw new TypeError("appendWorker() takes a class that extends Worker and has a forward() method");
    }
    const name = `${worker.name}_${this.#specs.length + 1}`;
    // A Python class's workers are processes of their own.
    if (pythonLaunch(worker) !== undefined) {
      if (options.isolation === "thread") throw new TypeError(`invalid stage ${name}: a Python stage runs its workers as processes; leave out isolation: "thread"`);
      options = { ...options, isolation: "process" };
    }
    this.#specs.push({ cls: worker, name, options: resolveStageOptions(name, options, worker) });
    workerContext()?.stages.push(worker);
    return this;
  }

  /**
   * Serves a route of stages as a V2 model too, over REST (`/v2/models/{name}/infer`) and gRPC:
   * its first stage receives each V2 request's tensors as an object with a field per input (a
   * one-element tensor as its element, text for BYTES, numbers, booleans, nested arrays by shape),
   * and its last stage's output object is answered as one output tensor per field (text as BYTES,
   * numbers as FP64, booleans as BOOL, arrays of them by their nesting, anything else as JSON text).
   * Model metadata shows the declared `inputs` and `outputs`, or tensors read from the stages' input
   * and output schemas. Throws a `TypeError` for invalid options; a route no stage serves stops
   * `run()`.
   *
   * @example
   * ```ts
   * server.appendWorker(Tokenize, { route: "/classify" });
   * server.appendWorker(Classify, { route: "/classify", maxBatchSize: 16 });
   * server.exposeRoute("/classify", { name: "classifier" });
   * ```
   */
  exposeRoute(route: string, options: RouteModelOptions): this {
    checkRouteModel(route, options);
    this.#routeModels.push({ route, options });
    return this;
  }

  /**
   * Adds a model served with the V2 protocol on the shared pool (`/v2/models/{name}/...`), with
   * the settings a `model-settings.json` would hold (see docs/models.md); its files (version
   * folders, `.onnx` file, runtime module) are found in `dir`, and must be inside it. Throws a
   * `SettingsError` naming the field when the settings are invalid.
   *
   * @example
   * ```ts
   * const server = new Server();
   * server.addModel({ name: "mlp", runtime: "onnx", maxBatchSize: 32, maxWaitMs: 5 }, "./models/mlp");
   * server.addModel({ name: "upper", runtime: "./upper.ts", replicas: 2 }, "./models/upper");
   * await server.run(["--workers", "2"]);
   * ```
   */
  addModel(settings: ModelSettingsInput, dir: string = process.cwd()): this {
    if (workerContext() !== undefined) return this;
    this.#models.models.push({ settings: parseSettings(settings, `addModel(${JSON.stringify(settings?.name)})`), dir: resolve(dir) });
    return this;
  }

  /**
   * Serves every model of a model repository folder: one folder per model, each with its
   * `model-settings.json`. A folder whose settings are broken is logged and left out; the
   * others load.
   *
   * @example
   * ```ts
   * await new Server().addModelRepository("./models").run();
   * ```
   */
  addModelRepository(dir: string): this {
    if (workerContext() === undefined) this.#models.repositories.push(resolve(dir));
    return this;
  }

  /**
   * Serves the route `route` as the model `model` of an OpenAI-compatible API, listed on
   * `/v1/models`. A text model (`kind: "text"`, the default) serves `/v1/completions` and
   * `/v1/chat/completions` (streaming with `stream: true`): the route's Worker takes a
   * {@link TextRequest} and streams {@link TextChunk}s. An embedding model (`kind: "embeddings"`)
   * serves `/v1/embeddings`: the route's Worker takes an {@link EmbeddingRequest} and returns an
   * {@link EmbeddingResponse}. See docs/generation.md. Call it once per model.
   *
   * @example
   * ```ts
   * server.appendWorker(TinyGpt, { route: "/generate", maxActive: 16 });
   * server.openAI({ model: "tiny-gpt", route: "/generate" });
   * server.appendWorker(Embeddings, { route: "/embeddings", maxBatchSize: 32 });
   * server.openAI({ model: "all-MiniLM-L6-v2", route: "/embeddings", kind: "embeddings" });
   * ```
   */
  openAI(options: { model: string; route: string; kind?: OpenAIModel["kind"] }): this {
    if (typeof options?.model !== "string" || options.model === "" || typeof options.route !== "string") throw new TypeError("openAI() takes { model, route }: a model name and the route that serves it");
    const kind = options.kind ?? "text";
    if (kind !== "text" && kind !== "embeddings") throw new TypeError(`openAI(): kind must be "text" or "embeddings", not ${JSON.stringify(options.kind)}`);
    this.#openAI.set(options.model, { route: options.route, kind });
    return this;
  }

  /**
   * Reads flags and `SHOAL_*` variables (or takes a configuration already read, as the `shoal`
   * command does), starts the HTTP server and the workers, and resolves with the address it
   * listens on once every worker is ready; inside a worker it resolves with undefined at once.
   * Exits the process with a one-line error if the configuration is wrong, the port is taken or
   * a worker's code cannot start (the same error twice in a row, or 5 failed attempts; requests
   * accepted meanwhile are answered 503 first); drains and exits 0 on SIGTERM or SIGINT.
   */
  async run(argv: readonly string[] | ServerConfig = process.argv.slice(2)): Promise<AddressInfo | undefined> {
    if (workerContext() !== undefined) return undefined;
    const config = isArgv(argv) ? loadConfig(argv, this.#defaults) : argv;
    const logger = createLogger(config);
    try {
      const models = this.#modelSources(config);
      if (this.#specs.length === 0 && models === undefined) throw new Error("no stages: call appendWorker() or addModel() before run(), or give --model-repository");
      // The assembly (doors, gRPC, pool) is loaded here, in the main thread only: a worker imports
      // this module again to find its class, and has no use for any of it.
      if (config.dryRun) {
        const { dryRunServer } = await import("./dry-run.js");
        process.exit((await dryRunServer(this.#declared(), config, logger, models)) ? 0 : 1);
      }
      const { startServer } = await import("./assembly.js");
      return await startServer(this.#declared(), config, logger, models);
    } catch (err) {
      logger.fatal((err as Error).message);
      process.stderr.write(`shoal: ${(err as Error).message}\n`);
      process.exit(1);
    }
  }

  #declared(): Declared {
    return { specs: this.#specs, routeModels: this.#routeModels, openAI: this.#openAI };
  }

  // Every source of models, or undefined when there is none.
  #modelSources(config: ServerConfig): ModelSources | undefined {
    const repositories = config.modelRepository === undefined ? this.#models.repositories : [...this.#models.repositories, resolve(config.modelRepository)];
    return repositories.length === 0 && this.#models.models.length === 0 ? undefined : { repositories, models: this.#models.models, modelName: config.modelName };
  }
}

function isArgv(value: readonly string[] | ServerConfig): value is readonly string[] {
  return Array.isArray(value);
}
