/**
 * `/openapi.json` and `/docs`: the server's OpenAPI document and Swagger UI to read and try it.
 * Swagger UI's files come from the swagger-ui-dist package, found through Node's module
 * resolution and read from disk once, so the page works offline and behind a firewall.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { ShoalError } from "../errors.js";
import type { OpenApiDocument } from "./openapi.js";

/** One answer of the docs endpoints. */
export interface Page {
  contentType: string;
  body: Buffer;
  cacheControl: string;
}

/**
 * A Swagger UI page: `assets` is where Swagger UI's files are and `init` the script that starts
 * it, both relative to the page, so that it also works behind a proxy that mounts the server
 * under a prefix (from /docs, "docs/x" is /docs/x).
 */
export function swaggerPage(assets: string, init: string): Buffer {
  return Buffer.from(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API docs</title>
<link rel="stylesheet" href="${assets}swagger-ui.css">
<link rel="icon" type="image/png" href="${assets}favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${assets}swagger-ui-bundle.js"></script>
<script src="${init}"></script>
</body>
</html>
`);
}

/**
 * The script that starts a Swagger UI page on the document at `document` (relative to the page).
 * In a file of its own rather than inline, so that a Content-Security-Policy without
 * 'unsafe-inline' allows the page.
 */
export function swaggerInit(document: string): Buffer {
  return Buffer.from(`window.ui = SwaggerUIBundle({ url: new URL(${JSON.stringify(document)}, document.baseURI).href, dom_id: "#swagger-ui", deepLinking: true });\n`);
}

const NO_CACHE = "no-cache";
/** The content-types of a Swagger UI page and of its script. */
export const HTML_TYPE = "text/html; charset=utf-8";
export const SCRIPT_TYPE = "text/javascript; charset=utf-8";
// Swagger UI's files change only with the installed package.
const CACHE_A_DAY = "public, max-age=86400";

/** Files of swagger-ui-dist served under /docs/, with their content-types. */
const ASSETS: ReadonlyMap<string, { file: string; contentType: string }> = new Map([
  ["/docs/swagger-ui.css", { file: "swagger-ui.css", contentType: "text/css; charset=utf-8" }],
  ["/docs/swagger-ui.css.map", { file: "swagger-ui.css.map", contentType: "application/json" }],
  ["/docs/swagger-ui-bundle.js", { file: "swagger-ui-bundle.js", contentType: SCRIPT_TYPE }],
  ["/docs/swagger-ui-bundle.js.map", { file: "swagger-ui-bundle.js.map", contentType: "application/json" }],
  ["/docs/favicon-32x32.png", { file: "favicon-32x32.png", contentType: "image/png" }],
]);

const OWN: ReadonlyMap<string, Page> = new Map([
  ["/docs", { contentType: HTML_TYPE, body: swaggerPage("docs/", "docs/init.js"), cacheControl: NO_CACHE }],
  ["/docs/init.js", { contentType: SCRIPT_TYPE, body: swaggerInit("openapi.json"), cacheControl: CACHE_A_DAY }],
]);

/**
 * Serves the OpenAPI document once it is published, the docs page and its assets. Answers only
 * with a {@link Page} or a rejected {@link ShoalError}.
 */
export class ApiDocs {
  #document: Page | undefined;
  readonly #assets = new Map<string, Promise<Page>>();

  /** Publishes the document; until then `/openapi.json` answers 503. */
  publish(document: OpenApiDocument): void {
    this.#document = { contentType: "application/json", body: Buffer.from(JSON.stringify(document)), cacheControl: NO_CACHE };
  }

  /** True for the paths this answers. */
  serves(path: string): boolean {
    return path === "/openapi.json" || OWN.has(path) || ASSETS.has(path);
  }

  /** The answer to a GET of a path it {@link serves}. */
  async page(path: string): Promise<Page> {
    if (path === "/openapi.json") {
      if (this.#document === undefined) throw new ShoalError("NOT_READY", "the API document is built once the workers are ready");
      return this.#document;
    }
    const own = OWN.get(path);
    if (own !== undefined) return own;
    let asset = this.#assets.get(path);
    if (asset === undefined) {
      asset = readAsset(ASSETS.get(path)!);
      this.#assets.set(path, asset);
      // A failed read (the package missing) is tried again on the next request.
      asset.catch(() => this.#assets.delete(path));
    }
    return asset;
  }
}

async function readAsset({ file, contentType }: { file: string; contentType: string }): Promise<Page> {
  try {
    const root = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
    return { contentType, body: await readFile(join(root, file)), cacheControl: CACHE_A_DAY };
  } catch {
    throw new ShoalError("SERVER", `/docs cannot read ${file} from the swagger-ui-dist package; is it installed?`);
  }
}
