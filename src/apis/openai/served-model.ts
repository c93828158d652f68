import { ShoalError } from "../../errors.js";
import type { Step } from "../../scheduling/task.js";

/** A model of the OpenAI API: the steps of the route that serves it, and which endpoints it serves. */
export interface ServedModel {
  steps: readonly Step[];
  /** `text`: `/v1/completions` and `/v1/chat/completions`; `embeddings`: `/v1/embeddings`. */
  kind: "text" | "embeddings";
}

/**
 * The steps of the model a request names, when it is a model of that kind; else the 404 OpenAI
 * answers for a model it does not have, saying what the model is when it is served for another
 * endpoint.
 */
export function servedSteps(models: ReadonlyMap<string, ServedModel>, name: string, kind: ServedModel["kind"]): readonly Step[] {
  const model = models.get(name);
  if (model === undefined) throw new ShoalError("NOT_FOUND", `the model '${name}' does not exist; GET /v1/models lists them`);
  if (model.kind !== kind) {
    const serves = model.kind === "embeddings" ? "an embedding model: POST /v1/embeddings serves it" : "a text model: POST /v1/completions and /v1/chat/completions serve it";
    throw new ShoalError("NOT_FOUND", `the model '${name}' is ${serves}`);
  }
  return model.steps;
}
