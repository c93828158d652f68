import { Counter, Gauge, type Registry } from "prom-client";
import type { ModelLifecycle, ServerGauges } from "./metric-types.js";

/** The states a model version's `state` label takes: a bounded set. */
const STATES = ["loading", "ready", "failed", "evicted", "unloading", "unloaded"] as const;

/**
 * The shared pool's model series: each version's state, replicas and memory, read at each scrape
 * from the pool and set afresh (a version gone from its repository leaves no gauge behind), and
 * its loads and evictions counted as they happen. Labelled by `model` (the name) and `version`:
 * one series set per model version of the repositories, as many as the index lists.
 */
export function modelSeries(name: (n: string) => string, registry: Registry, gauges: ServerGauges): (model: string, version: string) => ModelLifecycle {
  const registers = [registry];
  new Gauge({
    name: name("model_state"),
    help: `Where a model version of the shared pool stands: 1 for its state (${STATES.join(", ")}), 0 for the others`,
    labelNames: ["model", "version", "state"],
    registers,
    collect() {
      this.reset();
      for (const part of gauges.modelParts()) for (const m of part.models) for (const state of STATES) this.set({ model: m.name, version: m.version, state }, m.state === state ? 1 : 0);
    },
  });
  new Gauge({
    name: name("model_replicas"),
    help: "The workers of the shared pool that hold a model version loaded, one series of 1 per worker (worker: its id in its pool, models for Node.js, python-models for Python): sum by model and version for its replicas",
    labelNames: ["model", "version", "pool", "worker"],
    registers,
    collect() {
      this.reset();
      for (const part of gauges.modelParts()) for (const m of part.models) for (const w of m.workers) this.set({ model: m.name, version: m.version, pool: part.pool, worker: String(w) }, 1);
    },
  });
  new Gauge({
    name: name("model_memory_bytes"),
    help: "What a model version's replicas cost as the shared pool's memory budget counts them (its memoryBytes per worker that holds or is loading it)",
    labelNames: ["model", "version"],
    registers,
    collect() {
      this.reset();
      for (const part of gauges.modelParts()) for (const m of part.models) this.set({ model: m.name, version: m.version }, m.bytes);
    },
  });
  new Gauge({
    name: name("model_pool_memory_bytes"),
    help: "What the loaded models of a part of the shared pool cost together, against model_pool_memory_budget_bytes",
    labelNames: ["pool"],
    registers,
    collect() {
      for (const part of gauges.modelParts()) this.set({ pool: part.pool }, part.usedBytes);
    },
  });
  new Gauge({
    name: name("model_pool_memory_budget_bytes"),
    help: "--model-memory-bytes: what the loaded models of a part of the shared pool may cost together (0: no budget)",
    labelNames: ["pool"],
    registers,
    collect() {
      for (const part of gauges.modelParts()) this.set({ pool: part.pool }, Number.isFinite(part.budgetBytes) ? part.budgetBytes : 0);
    },
  });
  const loads = new Counter({ name: name("model_loads_total"), help: "Loads of a model version that finished with it serving: the first, reloads, and loads again after an eviction", labelNames: ["model", "version"], registers });
  const evictions = new Counter({ name: name("model_evictions_total"), help: "Times a model version was unloaded to make room for another within --model-memory-bytes", labelNames: ["model", "version"], registers });
  return (model, version) => {
    const loaded = loads.labels(model, version);
    const evicted = evictions.labels(model, version);
    // Shown as 0 from the start, as restarts are.
    loaded.inc(0);
    evicted.inc(0);
    return { loaded: () => loaded.inc(), evicted: () => evicted.inc() };
  };
}
