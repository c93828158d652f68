import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/**
 * Imports the server's module (or a model's runtime module) inside a worker and returns its
 * exports. Node 20 does not carry loader hooks such as tsx's into worker threads, so for a
 * TypeScript module tsx is registered in the worker first (found from the module's own folder,
 * then the working directory), when it is installed.
 */
export async function importServerModule(moduleUrl: string): Promise<Record<string, unknown>> {
  // A model host imports one module per model: tsx is registered once.
  if (/\.[cm]?tsx?$/.test(new URL(moduleUrl).pathname) && !(await (tsx ??= registerTsx(moduleUrl)))) {
    try {
      return (await import(moduleUrl)) as Record<string, unknown>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ERR_UNKNOWN_FILE_EXTENSION") throw err;
      throw new Error(`${moduleUrl} is TypeScript and tsx is not installed to load it in the worker: install tsx, or run the compiled JavaScript`);
    }
  }
  return (await import(moduleUrl)) as Record<string, unknown>;
}

let tsx: Promise<boolean> | undefined;

async function registerTsx(moduleUrl: string): Promise<boolean> {
  for (const base of [moduleUrl, pathToFileURL(`${process.cwd()}/`).href]) {
    let manifest: string;
    try {
      manifest = createRequire(base).resolve("tsx/package.json");
    } catch {
      continue;
    }
    // The ESM entry of tsx's API, read from its exports map (require.resolve gives the CJS one).
    const { exports } = JSON.parse(readFileSync(manifest, "utf8")) as { exports: Record<string, { import: { default: string } }> };
    const api = new URL(exports["./esm/api"]!.import.default, pathToFileURL(manifest));
    const { register } = (await import(api.href)) as { register(): unknown };
    register();
    return true;
  }
  return false;
}
