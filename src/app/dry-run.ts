import type { ServerConfig } from "../config.js";
import type { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import { Metrics } from "../metrics/registry.js";
import { Catalog, type ModelSources } from "../models/catalog.js";
import { Task } from "../scheduling/task.js";
import type { Route } from "../serving/route.js";
import { RestartLimit } from "../workers/restart-policy.js";
import { build, checkAnswers, sharedPool, type Declared } from "./assembly.js";

/** How one route's example went. */
interface Outcome {
  status: number;
  detail: string;
}

/**
 * Sends each route's example (declared by its first stage's Worker) through the whole pipeline
 * and prints each stage's forward time and the result. Returns true when every example was
 * answered 200. A route whose first Worker declares no example is reported and skipped.
 */
export async function dryRun(routes: readonly Route[], timeoutMs: number, print: (line: string) => void): Promise<boolean> {
  let ok = true;
  for (const route of routes) {
    const first = route.stages[0]!;
    const example = first.pool.declared?.example;
    if (example === undefined) {
      print(`${route.path}: skipped, ${first.name} declares no example`);
      continue;
    }
    const started = performance.now();
    const trace: { stage: string; ms: number }[] = [];
    const outcome = await new Promise<Outcome>((resolve) => {
      const meta = { requestId: "dry-run", headers: {}, deadline: Date.now() + timeoutMs, route: route.path };
      const task = new Task(route.stages, meta, started + timeoutMs, example, undefined, {
        send: (body, contentType) => resolve({ status: 200, detail: `${body.byteLength} bytes of ${contentType}` }),
        fail: (error: ShoalError) => resolve({ status: error.status, detail: error.publicMessage }),
        // A dry run's task does not ask for a stream: a streaming stage's chunks come gathered.
        chunk: () => {},
        end: () => {},
        release: () => {},
      });
      task.decoded = true;
      task.trace = trace;
      const refused = first.admit(task);
      if (refused !== undefined) task.fail(refused);
    });
    const total = performance.now() - started;
    const steps = trace.map((t) => `${t.stage} ${t.ms.toFixed(2)} ms`).join(" -> ");
    print(`${route.path}: ${steps || "no stage ran"} => ${outcome.status}, ${outcome.detail} (${total.toFixed(2)} ms in all)`);
    if (outcome.status !== 200) ok = false;
  }
  return ok;
}

/**
 * The dry run: one worker per stage, each route's example through its whole pipeline, then every
 * model loaded once on a pool of one worker (with no memory budget), and no port. True when all
 * of it worked.
 */
export async function dryRunServer(declared: Declared, config: ServerConfig, logger: Logger, models: ModelSources | undefined): Promise<boolean> {
  const print = (line: string) => process.stdout.write(`${line}\n`);
  const metrics = new Metrics(config.namespace, { stages: () => [], pools: () => [], models: () => [], modelParts: () => [], inFlight: () => 0, bytesInFlight: () => 0 }, { latency: config.latencyBuckets, batchSize: config.batchSizeBuckets });
  const restarts = new RestartLimit(0, config.restartWindowMs);
  const { stages, routes } = build(declared, config, logger, metrics, restarts, true);
  const modelPool = models === undefined ? undefined : sharedPool({ ...config, workers: 1, pythonWorkers: 1, modelMemoryBytes: 0 }, logger, metrics, restarts, models.repositories);
  try {
    await Promise.all(stages.map((s) => s.pool.start()));
    checkAnswers(routes);
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
