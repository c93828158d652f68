/**
 * What the V2 data plane answers for models served from MLServer's format (an `implementation`
 * naming an `MLModel` subclass) where MLServer answers otherwise than Shoal: its words for a
 * model it cannot find, and its server metadata for a repository of its models alone
 * (docs/python.md); a model's metadata is the model's own `metadata()`, which its worker reports.
 */
import type { ModelVersion } from "../models/model-version.js";
import { mlserverServerSettings, type MLServerServerSettings } from "../models/mlserver-settings.js";

/** The runtime of the models served from MLServer's format. */
export const MLSERVER_RUNTIME = "mlserver";

/** Whether a model version is served from MLServer's format. */
export function isMLServerModel(model: ModelVersion): boolean {
  return model.spec.runtime === MLSERVER_RUNTIME;
}

/** MLServer's 404 text (its `ModelNotFound`): with the version when the request named one. */
export function mlserverNotFound(name: string, version: string | undefined): string {
  return version === undefined || version === "" ? `Model ${name} not found` : `Model ${name} with version ${version} not found`;
}

// Each repository root's server settings, read once: the same file gave the Python workers.
const serverSettings = new Map<string, MLServerServerSettings>();

/**
 * MLServer's server metadata for a repository of its models: `server_name` (default
 * `"mlserver"`), `server_version` (default: the version of the mlserver package its Python
 * workers run, once a model has loaded) and `extensions` (default none) of the root's
 * `settings.json` or their `MLSERVER_*` variables.
 */
export function mlserverMetadata(roots: readonly string[], versions: readonly ModelVersion[]): { name: string; version: string; extensions: readonly string[] } {
  const root = roots[0];
  let settings: MLServerServerSettings = {};
  if (root !== undefined) {
    settings = serverSettings.get(root) ?? mlserverServerSettings(root);
    serverSettings.set(root, settings);
  }
  const reported = versions.map((m) => m.metadata?.runtimeVersion).find((v) => v !== undefined);
  return { name: settings.server_name ?? "mlserver", version: settings.server_version ?? reported ?? "", extensions: settings.extensions ?? [] };
}
