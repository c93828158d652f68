import { ShoalError } from "../errors.js";
import type { JsonSchema } from "../schema.js";
import { isV2Datatype } from "../tensor/datatypes.js";
import type { TensorMetadata } from "../v2/types.js";
import type { Route } from "./route.js";

/** How a route of stages is served as a V2 model ({@link Server.exposeRoute}). */
export interface RouteModelOptions {
  /** The model's name in `/v2/models/{name}` and in gRPC calls. */
  name: string;
  /** Its inputs, as model metadata shows them; default: from the first stage's input schema. */
  inputs?: TensorMetadata[];
  /** Its outputs, as model metadata shows them; default: from the last stage's output schema. */
  outputs?: TensorMetadata[];
}

const NAME = /^[A-Za-z0-9_.-]+$/;

/** Throws a TypeError naming what is wrong with the options of `exposeRoute(route, options)`. */
export function checkRouteModel(route: string, options: RouteModelOptions): void {
  const where = `exposeRoute(${JSON.stringify(route)})`;
  if (typeof options?.name !== "string" || !NAME.test(options.name)) throw new TypeError(`${where}: name must be letters, digits, '_', '.' and '-'`);
  for (const io of ["inputs", "outputs"] as const) {
    for (const t of options[io] ?? []) {
      if (typeof t?.name !== "string" || t.name === "" || !isV2Datatype(t.datatype) || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= -1)) {
        throw new TypeError(`${where}: each of ${io} must be { name, datatype (a V2 datatype), shape (whole numbers, -1 for any size) }`);
      }
    }
  }
}

/**
 * A route of stages served as a V2 model: its V2 requests go through the route's stages, the
 * first reading the request's tensors as an object, the last answering an object of outputs
 * (workers/v2-route.ts). It has no versions, no repository entry and no statistics of a model.
 */
export class RouteModel {
  /** Its canonical inference path; its requests are counted under it. */
  readonly path: string;

  constructor(
    readonly options: RouteModelOptions,
    readonly route: Route,
    /** Why it is not ready, or undefined: the server's readiness, as its stages are the server's. */
    readonly notReady: () => string | undefined,
  ) {
    this.path = `/v2/models/${options.name}/infer`;
  }

  get name(): string {
    return this.options.name;
  }

  /** Model metadata: the declared tensors, or tensors read from the stages' schemas. */
  metadata(): { name: string; versions: string[]; platform: string; inputs: TensorMetadata[]; outputs: TensorMetadata[] } {
    const { stages } = this.route;
    const input = stages[0]?.pool.declared?.schemas?.input;
    const output = stages.at(-1)?.pool.declared?.schemas?.output;
    return { name: this.name, versions: [], platform: "shoal_route", inputs: this.options.inputs ?? tensorsOf(input), outputs: this.options.outputs ?? tensorsOf(output) };
  }

  /** Model configuration (REST `config`). */
  config(): Record<string, unknown> {
    const { stages } = this.route;
    return { name: this.name, route: this.route.path, stages: stages.map((s) => ({ name: s.name, maxBatchSize: s.options.maxBatchSize, maxWaitMs: s.options.maxWaitMs })) };
  }

  /** A version was asked for: a route model has none. */
  version(version: string | undefined): this {
    if (version !== undefined && version !== "") throw new ShoalError("NOT_FOUND", `model '${this.name}' has no version '${version}'`);
    return this;
  }
}

// The tensors an object schema describes: a field per tensor, text as BYTES, numbers as FP64,
// booleans as BOOL, arrays of them of any length, anything else as BYTES (its JSON text).
function tensorsOf(schema: JsonSchema | undefined): TensorMetadata[] {
  const properties = schema?.properties;
  if (properties === null || typeof properties !== "object") return [];
  return Object.entries(properties as Record<string, JsonSchema>).map(([name, field]) => {
    const array = field.type === "array";
    const element = (array ? (field.items as JsonSchema | undefined) : field)?.type;
    const datatype = element === "number" || element === "integer" ? "FP64" : element === "boolean" ? "BOOL" : "BYTES";
    return { name, datatype, shape: array && element !== undefined && element !== "object" && element !== "array" ? [-1] : [1] };
  });
}
