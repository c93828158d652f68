/**
 * The server's OpenAPI 3.1 document, built on the coordinator from what each stage's workers
 * declared when they became ready (content-type, example, JSON Schemas): the coordinator never
 * constructs a Worker nor runs its code to describe it, and a worker in any language can
 * declare its schemas in its ready message.
 */
import { readFileSync } from "node:fs";
import { STATUS_CODES } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ERRORS } from "../errors.js";
import type { Route } from "../serving/route.js";
import type { JsonSchema } from "../schema.js";

/** An OpenAPI 3.1 document, as plain JSON. */
export type OpenApiDocument = { openapi: "3.1.0"; info: ApiInfo; paths: Record<string, unknown>; components: { schemas: Record<string, JsonSchema>; responses: Record<string, unknown> } };

/** The document's `info`: the name and version of the service. */
export interface ApiInfo {
  title: string;
  version: string;
}

// The statuses a route may answer besides 200 (404 and 405 are about paths, not requests).
const ROUTE_ERRORS = [400, 408, 413, 422, 429, 500, 503] as const;

const ERROR_SCHEMA: JsonSchema = {
  type: "object",
  properties: { error: { type: "string", description: "The error table's prefix for the status, then the detail." } },
  required: ["error"],
};

/**
 * Builds the document: a POST operation per route, with the first stage's input schema as its
 * request body and the last stage's output schema as its 200 response, the error answers of the
 * error table, and the server's own endpoints.
 */
export function openApiDocument(routes: readonly Route[], info: ApiInfo, metricsType: string): OpenApiDocument {
  const schemas: Record<string, JsonSchema> = { Error: ERROR_SCHEMA };
  const responses: Record<string, unknown> = {};
  const errorRefs: Record<string, unknown> = {};
  for (const status of ROUTE_ERRORS) {
    const name = errorName(status);
    responses[name] = errorResponse(status);
    errorRefs[status] = { $ref: `#/components/responses/${name}` };
  }
  const paths: Record<string, unknown> = {};
  for (const route of routes) {
    const first = route.stages[0]!;
    const last = route.stages[route.stages.length - 1]!;
    const input = first.pool.declared?.schemas?.input;
    const output = last.pool.declared?.schemas?.output;
    const requestType = first.pool.declared?.contentType ?? "application/json";
    const example = first.pool.declared?.example;
    const request: Record<string, unknown> = {};
    if (input !== undefined) request.schema = addSchema(schemas, `${first.name}.input`, input);
    if (example !== undefined && isJson(requestType)) request.example = example;
    const response: Record<string, unknown> = {};
    if (output !== undefined) response.schema = addSchema(schemas, `${last.name}.output`, output);
    paths[route.path] = {
      post: {
        operationId: `post${route.path.replace(/[^A-Za-z0-9]+/g, "_")}`,
        summary: route.stages.map((s) => s.name).join(" → "),
        tags: ["routes"],
        requestBody: { required: true, content: { [requestType]: request } },
        responses: {
          200: last.stream === undefined ? { description: "The result of the pipeline", content: { [last.pool.declared?.contentType ?? "application/json"]: response } } : streamed(last.stream.transport, last.pool.declared?.contentType ?? "application/json", response),
          ...Object.fromEntries(ROUTE_ERRORS.map((status) => [status, errorRefs[status]])),
        },
      },
    };
  }
  Object.assign(paths, builtinPaths(metricsType, errorRefs));
  return { openapi: "3.1.0", info, paths, components: { schemas, responses } };
}

/**
 * The name and version of the package the server's module belongs to (its nearest
 * `package.json`), or Shoal's defaults when it has none.
 */
export function appInfo(moduleUrl: string): ApiInfo {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    try {
      const { name, version } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: unknown; version?: unknown };
      return { title: typeof name === "string" ? name : "Shoal", version: typeof version === "string" ? version : "0.0.0" };
    } catch {
      const parent = dirname(dir);
      if (parent === dir) return { title: "Shoal", version: "0.0.0" };
      dir = parent;
    }
  }
}

// Adds a worker's JSON Schema under `name` and returns a reference to it. Its `$defs` (from
// recursive or reused schemas) become components of their own, since a `#/$defs/...` reference
// inside the OpenAPI document would resolve against the document, not the schema.
function addSchema(schemas: Record<string, JsonSchema>, name: string, schema: JsonSchema): { $ref: string } {
  const ref = (to: string) => `#/components/schemas/${to}`;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (typeof value !== "object" || value === null) return value;
    const out: JsonSchema = {};
    for (const [key, inner] of Object.entries(value)) {
      if (key === "$ref" && typeof inner === "string") out[key] = inner === "#" ? ref(name) : inner.replace(/^#\/\$defs\//, ref(`${name}.`));
      else out[key] = rewrite(inner);
    }
    return out;
  };
  const { $defs, ...root } = schema;
  schemas[name] = rewrite(root) as JsonSchema;
  for (const [def, inner] of Object.entries(($defs ?? {}) as Record<string, unknown>)) schemas[`${name}.${def}`] = rewrite(inner) as JsonSchema;
  return { $ref: ref(name) };
}

function isJson(contentType: string): boolean {
  return /^application\/(?:[\w.-]+\+)?json\b/.test(contentType);
}

// "Unprocessable Entity" for 422, and so on.
function errorName(status: number): string {
  return (STATUS_CODES[status] ?? `Status${status}`).replace(/[^A-Za-z0-9]/g, "");
}

// An error answer, described by the messages the error table gives its status.
function errorResponse(status: number): unknown {
  const prefixes = [...new Set(Object.values(ERRORS).filter((e) => e.status === status).map((e) => `\`${e.prefix}\``))];
  return {
    description: `${STATUS_CODES[status]}: the message starts with ${prefixes.join(" or ")}`,
    content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
  };
}

// A streaming route's answer: its chunks as Server-Sent Events or NDJSON lines, each chunk of the
// output schema, or gathered into one answer for a client that accepts neither.
function streamed(transport: "sse" | "ndjson", contentType: string, chunk: Record<string, unknown>): unknown {
  const each = { ...chunk, description: "one chunk; the Worker's gather() makes the one answer (by default the array of chunks)" };
  const sse = { "text/event-stream": { schema: { type: "string", description: "one `data:` event per chunk; `event: error` if the stream fails after it started" } } };
  const ndjson = { "application/x-ndjson": { schema: { type: "string", description: "one line per chunk; a last line {\"error\": ...} if the stream fails after it started" } } };
  return {
    description: `A stream of chunks, chosen by the Accept header (${transport === "sse" ? "Server-Sent Events" : "NDJSON"} when it names neither)`,
    content: { ...(transport === "sse" ? { ...sse, ...ndjson } : { ...ndjson, ...sse }), [contentType]: each },
  };
}

function json(description: string, schema: JsonSchema): unknown {
  return { description, content: { "application/json": { schema } } };
}

function builtinPaths(metricsType: string, errors: Record<string, unknown>): Record<string, unknown> {
  const get = (summary: string, responses: Record<string, unknown>) => ({ get: { summary, tags: ["server"], responses } });
  const object = (properties: Record<string, JsonSchema>): JsonSchema => ({ type: "object", properties, required: Object.keys(properties) });
  return {
    "/": get("Whether the server is serving", { 200: json("Serving", object({ status: { const: "serving" } })), 503: errors[503] }),
    "/healthz": get("Liveness: the process and its event loop respond", { 200: json("Live", object({ live: { const: true } })) }),
    "/readyz": get("Readiness: every stage has a live, warmed-up worker", {
      200: json("Ready", object({ ready: { const: true } })),
      503: json("Not ready: starting, a stage without a live worker, or shutting down", object({ ready: { const: false }, reason: { type: "string" } })),
    }),
    "/metrics": get("Prometheus metrics", { 200: { description: "The metrics in Prometheus text format", content: { [metricsType]: {} } } }),
    "/openapi.json": get("This document", { 200: json("The OpenAPI document", { type: "object" }), 503: errors[503] }),
    "/docs": get("Interactive API documentation (Swagger UI)", { 200: { description: "An HTML page", content: { "text/html": {} } } }),
  };
}
