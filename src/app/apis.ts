import type { Catalog } from "../models/catalog.js";
import type { Delegate, DelegateParts } from "../http/intake.js";
import { OpenAIHandler, type ServedModel } from "../apis/openai/openai.js";
import type { Route } from "../serving/route.js";
import { RouteModel, type RouteModelOptions } from "../serving/route-model.js";
import { V2Handler } from "../apis/v2/v2-handler.js";
import { MLServerHandlers } from "../apis/v2/mlserver-handlers.js";
import type { AccessPolicy } from "../serving/access-policy.js";
import type { Admission } from "../serving/admission.js";
import { V2DataPlane } from "../serving/data-plane.js";
import type { Dialect } from "../http/dialect.js";
import type { MosecCompat } from "../config.js";
import { MOSEC_DIALECT, MosecOpenApi } from "../apis/mosec/mosec.js";

/** What a server serves beside its stage routes, as its code declared it. */
export interface ApiSources {
  /** The models of the shared pool, when there are any. */
  catalog: Catalog | undefined;
  /** Routes served as V2 models (`exposeRoute()`). */
  routeModels: readonly { route: string; options: RouteModelOptions }[];
  /** Routes served as models of the OpenAI API (`openAI()`), by model name. */
  openAI: ReadonlyMap<string, OpenAIModel>;
  /** The most bytes of a body the OpenAI routes parse (`--max-openai-size`). */
  openAIMaxBytes: number;
  /** Set when the server answers as a Mosec server does. */
  mosec: MosecCompat | undefined;
}

/** A route served as a model of the OpenAI API, and which of its endpoints the model serves. */
export interface OpenAIModel {
  route: string;
  /** `text`: `/v1/completions` and `/v1/chat/completions`; `embeddings`: `/v1/embeddings`. */
  kind: "text" | "embeddings";
}

/** What the V2 data plane and the handlers are made with, from the serving core. */
export interface ApiCore {
  admission: Admission;
  access: AccessPolicy;
  /** Why the server is not ready ("shutting down" included), or undefined. */
  notReady: () => string | undefined;
}

/**
 * The handlers of the APIs on top of the routes and models: the V2 protocol under `/v2` (models
 * and routes served as models) on its data plane, which the gRPC door serves too, and the OpenAI
 * API under `/v1`, each when it has something to serve; for a Mosec server, the dialect of its
 * routes and its OpenAPI document under `/openapi`. Throws when a declaration names a route no
 * stage serves.
 */
export function apiDelegates(routes: ReadonlyMap<string, Route>, sources: ApiSources, core: ApiCore): { delegates: ((door: DelegateParts) => Delegate)[]; plane: V2DataPlane | undefined; routeDialect: Dialect | undefined } {
  const delegates: ((door: DelegateParts) => Delegate)[] = [];
  const routeModels = new Map<string, RouteModel>();
  for (const { route, options } of sources.routeModels) {
    const served = routes.get(route);
    if (served === undefined) throw new Error(`exposeRoute(${JSON.stringify(route)}): no stage serves that route`);
    // What a V2 answer needs of its request travels with the item's value, which a fan-out splits.
    const fans = served.stages.find((s) => s.options.fanOut !== undefined);
    if (fans !== undefined) throw new Error(`exposeRoute(${JSON.stringify(route)}): stage ${fans.name} fans out, and a route that fans out is not served as a V2 model`);
    routeModels.set(options.name, new RouteModel(options, served, core.notReady));
  }
  const plane = sources.catalog !== undefined || routeModels.size > 0 ? new V2DataPlane(sources.catalog, routeModels, core.notReady, core.access, core.admission) : undefined;
  if (plane !== undefined) delegates.push((door) => new V2Handler(plane, door));
  if (sources.openAI.size > 0) {
    const served = new Map<string, ServedModel>();
    for (const [model, { route: path, kind }] of sources.openAI) {
      const route = routes.get(path);
      if (route === undefined) throw new Error(`openAI(): model ${model} names the route ${path}, which no stage serves`);
      served.set(model, { steps: route.stages, kind });
    }
    delegates.push(() => new OpenAIHandler(served, sources.openAIMaxBytes));
  }
  const openapi = sources.mosec?.openapi;
  if (openapi !== undefined) delegates.push(() => new MosecOpenApi(openapi));
  // Anywhere no other delegate is: the custom handlers of MLServer models.
  if (plane !== undefined && sources.catalog !== undefined) delegates.push(() => new MLServerHandlers(plane));
  return { delegates, plane, routeDialect: sources.mosec === undefined ? undefined : MOSEC_DIALECT };
}
