/**
 * `/dashboard` (with `--dashboard`): a live page of the server at work, its files read from the
 * package's `dashboard/` folder (no CDN: it works offline), and `/dashboard/metrics.json`, the
 * same series as `/metrics` as JSON, which the page polls every second, with why each model
 * version of the shared pool that is not ready is not (text a label should not carry).
 */
import { readFile } from "node:fs/promises";
import { ShoalError } from "../errors.js";
import type { Metrics } from "../metrics/registry.js";
import type { Page } from "./docs.js";

// From dist/http/ or src/http/ alike, the package's dashboard/ folder.
const FOLDER = new URL("../../dashboard/", import.meta.url);

/** The page and its assets, by path, with their files and content-types. */
const FILES: ReadonlyMap<string, { file: string; contentType: string }> = new Map([
  ["/dashboard", { file: "index.html", contentType: "text/html; charset=utf-8" }],
  ["/dashboard/dashboard.css", { file: "dashboard.css", contentType: "text/css; charset=utf-8" }],
  ["/dashboard/dashboard.js", { file: "dashboard.js", contentType: "text/javascript; charset=utf-8" }],
]);

const DATA = "/dashboard/metrics.json";

/** Serves the dashboard; answers only with a {@link Page} or a rejected {@link ShoalError}. */
export class Dashboard {
  readonly #files = new Map<string, Promise<Page>>();

  constructor(
    readonly metrics: Metrics,
    readonly namespace: string,
  ) {}

  /** True for the paths this answers. */
  serves(path: string): boolean {
    return path === DATA || FILES.has(path);
  }

  /** The answer to a GET of a path it {@link serves}. */
  async page(path: string): Promise<Page> {
    if (path === DATA) {
      const metrics = await this.metrics.registry.getMetricsAsJSON();
      const reasons = this.metrics.modelParts().flatMap((p) => p.models.filter((m) => m.reason !== "").map((m) => ({ model: m.name, version: m.version, reason: m.reason })));
      return { contentType: "application/json", body: Buffer.from(JSON.stringify({ namespace: this.namespace, metrics, reasons })), cacheControl: "no-store" };
    }
    let file = this.#files.get(path);
    if (file === undefined) {
      file = read(FILES.get(path)!);
      this.#files.set(path, file);
      file.catch(() => this.#files.delete(path));
    }
    return file;
  }
}

async function read({ file, contentType }: { file: string; contentType: string }): Promise<Page> {
  try {
    // Read once per process: the files change only with the installed package.
    return { contentType, body: await readFile(new URL(file, FOLDER)), cacheControl: "no-cache" };
  } catch {
    throw new ShoalError("SERVER", `/dashboard cannot read ${file} from the package's dashboard/ folder`);
  }
}
