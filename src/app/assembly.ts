/**
 * The assembly of a server: what its code declared becomes stages, a shared pool, the serving
 * core and its doors, started and stopped in order. The runtime's HTTP server is chosen here.
 */
import { realpathSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import { Metrics } from "../metrics/registry.js";
import { Catalog, type ModelSources } from "../models/catalog.js";
import { serverParallelWorkers } from "../models/mlserver-settings.js";
import { ModelPool } from "../models/model-pool.js";
import { SharedPools } from "../models/shared-pools.js";
import { checkFanOut, checkGatheredAnswers } from "../scheduling/check-fan-out.js";
import { Stage } from "../scheduling/stage.js";
import type { Isolation, ResolvedStageOptions } from "../stage-options.js";
import type { WorkerClass } from "../worker.js";
import type { ChannelFactory } from "../workers/channel.js";
import type { RequestLimits } from "../workers/messages.js";
import { RestartLimit } from "../workers/restart-policy.js";
import { commandChannel, processChannel } from "../workers/process-channel.js";
import { modelHostLaunch, pythonLaunch } from "../python.js";
import { threadChannel } from "../workers/thread-channel.js";
import { ApiDocs } from "../http/docs.js";
import { HttpFront } from "../http/http-front.js";
import { appInfo, openApiDocument } from "../http/openapi.js";
import { AccessPolicy } from "../serving/access-policy.js";
import { Admission } from "../serving/admission.js";
import { ServerHealth } from "../serving/health.js";
import type { Door, ServingCore } from "../serving/core.js";
import type { Route } from "../serving/route.js";
import type { RouteModelOptions } from "../serving/route-model.js";
import { apiDelegates, type OpenAIModel } from "./apis.js";
import { startIdleGc } from "./idle-gc.js";
import { startTracing } from "../metrics/tracing.js";
import { httpListener } from "./runtime.js";

/** How each kind of stage isolation starts and talks to its workers. */
const CHANNELS: Record<Isolation, ChannelFactory> = { thread: threadChannel, process: processChannel };

/** One stage as the code appended it. */
export interface StageSpec {
  cls: WorkerClass;
  name: string;
  options: ResolvedStageOptions;
}

/** What a server's code declared, as the {@link Server} façade collected it. */
export interface Declared {
  readonly specs: readonly StageSpec[];
  /** Routes served as V2 models (`exposeRoute()`). */
  readonly routeModels: readonly { route: string; options: RouteModelOptions }[];
  /** Routes served as models of the OpenAI API (`openAI()`), by model name. */
  readonly openAI: ReadonlyMap<string, OpenAIModel>;
}

/**
 * Starts what a server's code declared: its stages and shared pool, the serving core, the HTTP
 * door on the runtime's own server, and the gRPC door when there are V2 models and a port; then
 * the workers. Resolves with the address once every worker is ready; on SIGTERM or SIGINT it
 * drains (every door through the one admission) and exits. Throws a one-line error when a port
 * cannot be had or the workers cannot start (what was accepted meanwhile is answered first).
 */
export async function startServer(declared: Declared, config: ServerConfig, logger: Logger, models: ModelSources | undefined): Promise<AddressInfo> {
  startIdleGc(config.idleGcMs, logger);
  // Loaded only when the OTEL_* environment asks for traces.
  const stopTracing = await startTracing();
  if (stopTracing !== undefined) logger.info({ endpoint: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT }, "tracing on");
  const restarts = new RestartLimit(config.maxRestarts, config.restartWindowMs);
  const admission = new Admission(config.maxInflightBytes);
  const health = new ServerHealth(() => stages, () => modelPool, restarts, () => admission.draining);
  const metrics: Metrics = new Metrics(config.namespace, {
    stages: (): readonly Stage[] => stages,
    pools: () => health.gauges(),
    models: () => modelPool?.versions().map((m) => ({ name: m.label, queued: m.queued, behindMs: m.behindMs, running: m.running, liveWorkers: m.liveWorkers })) ?? [],
    modelParts: () => modelPool?.report() ?? [],
    inFlight: () => admission.inFlight,
    bytesInFlight: () => admission.bytesInFlight,
  }, { latency: config.latencyBuckets, batchSize: config.batchSizeBuckets }, config.mosec === undefined ? undefined : { namespace: config.mosec.namespace, timeoutMs: config.timeoutMs });
  const { stages, routes } = build(declared, config, logger, metrics, restarts);
  const modelPool = models === undefined ? undefined : sharedPool(config, logger, metrics, restarts, models.repositories);
  const docs = new ApiDocs();
  const catalog = modelPool === undefined ? undefined : new Catalog(models!, modelPool, logger, config.controlTimeoutMs);
  catalog?.register();
  const access = new AccessPolicy(config);
  const apis = apiDelegates(routes, { catalog, routeModels: declared.routeModels, openAI: declared.openAI, openAIMaxBytes: config.maxOpenAISize, mosec: config.mosec }, { admission, access, notReady: () => health.notReady() });
  const front = new HttpFront({ routes, config, admission, access, health, metrics, docs, logger, listener: httpListener(config), delegates: apis.delegates, routeDialect: apis.routeDialect });
  const address = await front.listen();
  // The doors beside HTTP, each onto the same core: a new door is one line here.
  const core: ServingCore | undefined = apis.plane === undefined ? undefined : { admission, plane: apis.plane, metrics };
  const doors: Door[] = [];
  // The V2 protocol over gRPC too, for the same models, when there are models and a port for it.
  // Loaded only then: grpc-js and the protocol's descriptors are megabytes of the HTTP thread's
  // heap, which every full collection marks again.
  if (core !== undefined && config.grpcPort > 0) {
    const { GrpcFront } = await import("../grpc/grpc-front.js");
    doors.push(new GrpcFront(core, config, logger));
  }
  for (let started = 0; started < doors.length; started++) {
    try {
      await doors[started]!.start();
    } catch (err) {
      for (const door of doors.slice(0, started + 1)) await door.close();
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
  handleSignals(admission, front, doors, pools, config, logger, stopTracing);
  try {
    await Promise.all([...stages.map((s) => s.pool.start()), modelPool?.start()]);
    checkAnswers(routes);
  } catch (err) {
    // Giving up: what was accepted meanwhile is answered before the process exits.
    admission.abandon(new ShoalError("NOT_READY", "the server could not start"));
    await Promise.all(pools.map((pool) => pool.close()));
    for (const door of doors) await door.close();
    await front.close();
    throw err;
  }
  // Every stage has reported its content-type and schemas by now.
  docs.publish(openApiDocument([...routes.values()], appInfo(mainModuleUrl()), metrics.contentType()));
  for (const door of doors) door.ready();
  logger.info("ready");
  return address;
}

/** The stages and the routes' pipelines. `oneWorker` starts a single worker per stage. */
export function build(declared: Declared, config: ServerConfig, logger: Logger, metrics: Metrics, restarts: RestartLimit, oneWorker = false): { stages: Stage[]; routes: Map<string, Route> } {
  const context = { moduleUrl: mainModuleUrl(), capacity: config.capacity, timeoutMs: config.timeoutMs, streamTimeoutMs: config.streamTimeoutMs, limits: requestLimits(config), logger, metrics, restarts };
  const stages = declared.specs.map((spec, index) => {
    const options = oneWorker ? { ...spec.options, num: 1, env: spec.options.env?.slice(0, 1) } : spec.options;
    const launch = pythonLaunch(spec.cls);
    return new Stage(spec.name, index, spec.cls.name, options, { ...context, channel: launch === undefined ? CHANNELS[options.isolation] : commandChannel(launch) });
  });
  const routes = new Map<string, Route>();
  for (const stage of stages) {
    for (const path of stage.options.routes) {
      const route = routes.get(path) ?? { path, stages: [] };
      routes.set(path, { path, stages: [...route.stages, stage] });
    }
  }
  for (const route of routes.values()) checkFanOut(route.path, route.stages);
  return { stages, routes };
}

/** Checks, once every stage's workers have said what they encode, what the routes' stages answer together (scheduling/check-fan-out.ts). */
export function checkAnswers(routes: ReadonlyMap<string, Route>): void {
  for (const { path, stages } of routes.values()) checkGatheredAnswers(path, stages.map((s) => ({ name: s.name, options: s.options, contentType: s.pool.declared?.contentType })));
}

/**
 * The shared pool of workers that hosts the models: `--workers` Node.js workers, and
 * `--python-workers` Python processes (by default the `parallel_workers` of an MLServer
 * `settings.json` at a repository's root, else 1) once a model of a Python runtime needs them.
 */
export function sharedPool(config: ServerConfig, logger: Logger, metrics: Metrics, restarts: RestartLimit, repositories: readonly string[]): SharedPools {
  const options = {
    limits: requestLimits(config),
    capacity: config.capacity,
    timeoutMs: config.timeoutMs,
    memoryBytes: config.modelMemoryBytes === 0 ? Infinity : config.modelMemoryBytes,
    logger,
    metrics,
    restarts,
  };
  const node = new ModelPool({ ...options, workers: config.workers, channel: CHANNELS[config.modelIsolation] });
  const pythonWorkers = () => config.pythonWorkers ?? repositories.map((root) => serverParallelWorkers(root)).find((n) => n !== undefined) ?? 1;
  return new SharedPools(node, () => new ModelPool({ ...options, name: "python-models", workers: pythonWorkers(), channel: commandChannel(modelHostLaunch()) }), logger);
}

// On SIGTERM or SIGINT: stop taking requests at every door, wait for those in flight (from their
// first byte) up to --timeout, close the pools and the doors, exit 0. A second signal exits at once.
function handleSignals(admission: Admission, front: HttpFront, doors: readonly Door[], pools: { close(): Promise<void> }[], config: ServerConfig, logger: Logger, stopTracing: (() => Promise<void>) | undefined): void {
  let stopping = false;
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, inFlight: admission.inFlight }, "draining");
    const drained = admission.drain(config.timeoutMs);
    for (const door of doors) door.drain();
    await drained;
    await Promise.all(pools.map((pool) => pool.close()));
    for (const door of doors) await door.close();
    await front.close();
    // The spans not yet sent (a collector that is gone costs the exporter's own timeout at most).
    await stopTracing?.().catch((err: Error) => logger.warn({ err: err.message }, "tracing: the last spans were not sent"));
    // The counts of collapsed error lines still pending.
    logger.flush();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

// The gRPC door (grpc/) as one of the doors.
function requestLimits(config: ServerConfig): RequestLimits {
  return { maxTensorElements: config.maxTensorElements, maxBytesElements: config.maxBytesElements };
}

// The module the workers import to find their classes: the script Node was started with.
function mainModuleUrl(): string {
  const main = process.argv[1];
  if (main === undefined) throw new Error("cannot tell which module to load in the workers: start the server from a script file");
  return pathToFileURL(realpathSync(main)).href;
}
