import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import { loadConfig, type ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import { createLogger, type Logger } from "../logger.js";
import { Metrics } from "../metrics/registry.js";
import { Catalog, type ModelSources } from "../models/catalog.js";
import { ModelPool } from "../models/model-pool.js";
import { parseSettings, type ModelSettingsInput } from "../models/settings.js";
import type { Route } from "../serving/route.js";
import { Stage } from "../scheduling/stage.js";
import { resolveStageOptions, type Isolation, type ResolvedStageOptions, type StageOptions } from "../stage-options.js";
import type { WorkerClass } from "../worker.js";
import { workerContext } from "../workers/context.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { RequestLimits } from "../workers/messages.js";
import { RestartLimit } from "../workers/restart-policy.js";
import { processChannel } from "../workers/process-channel.js";
import { threadChannel } from "../workers/thread-channel.js";
import { ApiDocs } from "../http/docs.js";
import { dryRun } from "./dry-run.js";
import { ServerHealth } from "../serving/health.js";
import { GrpcFront } from "../grpc/grpc-front.js";
import { HttpFront } from "../http/http-front.js";
import { startIdleGc } from "./idle-gc.js";
import { apiDelegates } from "./apis.js";
import { checkRouteModel, type RouteModelOptions } from "../serving/route-model.js";
import { appInfo, openApiDocument } from "../http/openapi.js";

/** How each kind of stage isolation starts and talks to its workers. */
const CHANNELS: Record<Isolation, ChannelFactory> = { thread: threadChannel, process: processChannel };

/** Settings given in code: defaults that CLI flags and `SHOAL_*` variables override. */
export type ServerOptions = Partial<ServerConfig>;

interface StageSpec { cls: WorkerClass; name: string; options: ResolvedStageOptions }

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
  readonly #openAI = new Map<string, string>();
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
   * Serves the route `route` as the model `model` of an OpenAI-compatible API: `/v1/models`,
   * `/v1/completions` and `/v1/chat/completions` (streaming with `stream: true`). The route's
   * Worker takes a {@link TextRequest} and streams {@link TextChunk}s; see docs/streaming.md.
   * Call it once per model.
   *
   * @example
   * ```ts
   * server.appendWorker(TinyGpt, { route: "/generate", maxActive: 16 });
   * server.openAI({ model: "tiny-gpt", route: "/generate" });
   * ```
   */
  openAI(options: { model: string; route: string }): this {
    if (typeof options?.model !== "string" || options.model === "" || typeof options.route !== "string") throw new TypeError("openAI() takes { model, route }: a model name and the route that serves it");
    this.#openAI.set(options.model, options.route);
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
      if (config.dryRun) process.exit((await this.#dryRun(config, logger, models)) ? 0 : 1);
      return await this.#start(config, logger, models);
    } catch (err) {
      logger.fatal((err as Error).message);
      process.stderr.write(`shoal: ${(err as Error).message}\n`);
      process.exit(1);
    }
  }

  // The stages and the routes' pipelines. `oneWorker` starts a single worker per stage.
  #build(config: ServerConfig, logger: Logger, metrics: Metrics, restarts: RestartLimit, oneWorker = false): { stages: Stage[]; routes: Map<string, Route> } {
    const context = { moduleUrl: mainModuleUrl(), capacity: config.capacity, timeoutMs: config.timeoutMs, streamTimeoutMs: config.streamTimeoutMs, limits: requestLimits(config), logger, metrics, restarts };
    const stages = this.#specs.map((spec, index) => {
      const options = oneWorker ? { ...spec.options, num: 1, env: spec.options.env?.slice(0, 1) } : spec.options;
      return new Stage(spec.name, index, spec.cls.name, options, { ...context, channel: CHANNELS[options.isolation] });
    });
    const routes = new Map<string, Route>();
    for (const stage of stages) {
      for (const path of stage.options.routes) {
        const route = routes.get(path) ?? { path, stages: [] };
        routes.set(path, { path, stages: [...route.stages, stage] });
      }
    }
    return { stages, routes };
  }

  // Every source of models, or undefined when there is none.
  #modelSources(config: ServerConfig): ModelSources | undefined {
    const repositories = config.modelRepository === undefined ? this.#models.repositories : [...this.#models.repositories, resolve(config.modelRepository)];
    return repositories.length === 0 && this.#models.models.length === 0 ? undefined : { repositories, models: this.#models.models, modelName: config.modelName };
  }

  async #start(config: ServerConfig, logger: Logger, models: ModelSources | undefined): Promise<AddressInfo> {
    let front: HttpFront | undefined;
    startIdleGc(config.idleGcMs, logger);
    const restarts = new RestartLimit(config.maxRestarts, config.restartWindowMs);
    const health = new ServerHealth(() => stages, () => modelPool, restarts);
    const metrics: Metrics = new Metrics(config.namespace, {
      stages: (): readonly Stage[] => stages,
      pools: () => health.gauges(),
      models: () => modelPool?.versions().map((m) => ({ name: m.label, queued: m.queued, liveWorkers: m.liveWorkers })) ?? [],
      inFlight: () => front?.inFlight ?? 0,
      bytesInFlight: () => front?.bytesInFlight ?? 0,
    });
    const { stages, routes } = this.#build(config, logger, metrics, restarts);
    const modelPool = models === undefined ? undefined : this.#modelPool(config, logger, metrics, restarts);
    const docs = new ApiDocs();
    const catalog = modelPool === undefined ? undefined : new Catalog(models!, modelPool, logger, config.controlTimeoutMs);
    catalog?.register();
    const apis = apiDelegates(routes, { catalog, routeModels: this.#routeModels, openAI: this.#openAI, openAIMaxBytes: config.maxOpenAISize }, () => health.notReady());
    front = new HttpFront(routes, config, health, metrics, docs, logger, apis.delegates);
    const address = await front.listen();
    // The V2 protocol over gRPC too, for the same models, when there are models and a port for it.
    const v2 = apis.v2();
    const grpc = v2 !== undefined && config.grpcPort > 0 ? new GrpcFront(v2, config, logger) : undefined;
    if (grpc !== undefined) {
      try {
        const port = await grpc.listen();
        logger.info({ address: config.address, grpcPort: port }, `gRPC listening on ${config.address}:${port}`);
      } catch (err) {
        grpc.close();
        await front.close();
        throw err;
      }
    }
    logger.info(
      {
        address: address.address,
        port: address.port,
        http: front.server,
        routes: Object.fromEntries([...routes.values()].map((r) => [r.path, r.stages.map((s) => s.name)])),
        stages: stages.map((s) => ({ name: s.name, num: s.options.num, maxBatchSize: s.options.maxBatchSize, maxWaitMs: s.options.maxWaitMs })),
      },
      `listening on http://${address.address}:${address.port}`,
    );
    const pools = [...stages.map((s) => s.pool), ...(modelPool === undefined ? [] : [modelPool])];
    this.#handleSignals(front, grpc, pools, config, logger);
    try {
      await Promise.all([...stages.map((s) => s.pool.start()), modelPool?.start()]);
    } catch (err) {
      // Giving up: what was accepted meanwhile is answered before the process exits.
      front.abandon(new ShoalError("NOT_READY", "the server could not start"));
      await Promise.all(pools.map((pool) => pool.close()));
      grpc?.close();
      await front.close();
      throw err;
    }
    // Every stage has reported its content-type and schemas by now.
    docs.publish(openApiDocument([...routes.values()], appInfo(mainModuleUrl()), metrics.contentType));
    grpc?.refresh();
    logger.info("ready");
    return address;
  }

  // One worker per stage, each route's example through its whole pipeline, then every model
  // loaded once on a pool of one worker (with no memory budget), and no HTTP port.
  async #dryRun(config: ServerConfig, logger: Logger, models: ModelSources | undefined): Promise<boolean> {
    const print = (line: string) => process.stdout.write(`${line}\n`);
    const metrics = new Metrics(config.namespace, { stages: () => [], pools: () => [], models: () => [], inFlight: () => 0, bytesInFlight: () => 0 });
    const restarts = new RestartLimit(0, config.restartWindowMs);
    const { stages, routes } = this.#build(config, logger, metrics, restarts, true);
    const modelPool = models === undefined ? undefined : this.#modelPool({ ...config, workers: 1, modelMemoryBytes: 0 }, logger, metrics, restarts);
    try {
      await Promise.all(stages.map((s) => s.pool.start()));
      let ok = await dryRun([...routes.values()], config.timeoutMs, print);
      if (modelPool !== undefined) {
        const catalog = new Catalog(models!, modelPool, logger);
        catalog.register();
        await modelPool.start();
        for (const { name, version, state, reason } of catalog.index(false)) {
          print(`model ${version === undefined ? name : `${name}/${version}`}: ${state === "READY" ? "loaded" : `${state}, ${reason}`}`);
          if (state !== "READY") ok = false;
        }
      }
      return ok;
    } finally {
      await Promise.all([...stages.map((stage) => stage.pool.close()), modelPool?.close()]);
    }
  }

  // The shared pool of workers that hosts the models.
  #modelPool(config: ServerConfig, logger: Logger, metrics: Metrics, restarts: RestartLimit): ModelPool {
    return new ModelPool({
      workers: config.workers,
      channel: CHANNELS[config.modelIsolation],
      limits: requestLimits(config),
      capacity: config.capacity,
      timeoutMs: config.timeoutMs,
      memoryBytes: config.modelMemoryBytes === 0 ? Infinity : config.modelMemoryBytes,
      logger,
      metrics,
      restarts,
    });
  }

  #handleSignals(front: HttpFront, grpc: GrpcFront | undefined, pools: { close(): Promise<void> }[], config: ServerConfig, logger: Logger): void {
    let stopping = false;
    const stop = async (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal, inFlight: front.inFlight }, "draining");
      const drained = front.drain(config.timeoutMs);
      grpc?.drain();
      await drained;
      await Promise.all(pools.map((pool) => pool.close()));
      grpc?.close();
      await front.close();
      // The counts of collapsed error lines still pending.
      logger.flush();
      logger.info("stopped");
      process.exit(0);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  }
}

function requestLimits(config: ServerConfig): RequestLimits {
  return { maxTensorElements: config.maxTensorElements, maxBytesElements: config.maxBytesElements };
}

function isArgv(value: readonly string[] | ServerConfig): value is readonly string[] {
  return Array.isArray(value);
}

// The module the workers import to find their classes: the script Node was started with.
function mainModuleUrl(): string {
  const main = process.argv[1];
  if (main === undefined) throw new Error("cannot tell which module to load in the workers: start the server from a script file");
  return pathToFileURL(realpathSync(main)).href;
}
