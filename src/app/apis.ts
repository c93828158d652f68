import type { Catalog } from "../models/catalog.js";
import type { Stage } from "../scheduling/stage.js";
import type { Delegate, Intake } from "../http/intake.js";
import { OpenAIHandler } from "../apis/openai/openai.js";
import type { Route } from "../serving/route.js";
import { RouteModel, type RouteModelOptions } from "../serving/route-model.js";
import { V2Handler } from "../apis/v2/v2-rest.js";

/** What a server serves beside its stage routes, as its code declared it. */
export interface ApiSources {
  /** The models of the shared pool, when there are any. */
  catalog: Catalog | undefined;
  /** Routes served as V2 models (`exposeRoute()`). */
  routeModels: readonly { route: string; options: RouteModelOptions }[];
  /** Routes served as models of the OpenAI API (`openAI()`), by model name. */
  openAI: ReadonlyMap<string, string>;
  /** The most bytes of a body the OpenAI routes parse (`--max-openai-size`). */
  openAIMaxBytes: number;
}

/**
 * The handlers of the APIs on top of the routes and models: the V2 protocol under `/v2` (models
 * and routes served as models) and the OpenAI API under `/v1`, each when it has something to
 * serve. `v2()` gives the V2 handler once the front has made it, for the gRPC front. Throws when
 * a declaration names a route no stage serves.
 */
export function apiDelegates(routes: ReadonlyMap<string, Route>, sources: ApiSources, notReady: () => string | undefined): { delegates: ((intake: Intake) => Delegate)[]; v2(): V2Handler | undefined } {
  const delegates: ((intake: Intake) => Delegate)[] = [];
  const routeModels = new Map<string, RouteModel>();
  for (const { route, options } of sources.routeModels) {
    const served = routes.get(route);
    if (served === undefined) throw new Error(`exposeRoute(${JSON.stringify(route)}): no stage serves that route`);
    routeModels.set(options.name, new RouteModel(options, served, notReady));
  }
  let handler: V2Handler | undefined;
  if (sources.catalog !== undefined || routeModels.size > 0) delegates.push((intake) => (handler = new V2Handler(sources.catalog, routeModels, notReady, intake)));
  if (sources.openAI.size > 0) {
    const served = new Map<string, readonly Stage[]>();
    for (const [model, path] of sources.openAI) {
      const route = routes.get(path);
      if (route === undefined) throw new Error(`openAI(): model ${model} names the route ${path}, which no stage serves`);
      served.set(model, route.stages);
    }
    delegates.push((intake) => new OpenAIHandler(served, intake, sources.openAIMaxBytes));
  }
  return { delegates, v2: () => handler };
}
