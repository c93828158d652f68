import { parseJsonBody } from "../../codecs.js";
import { EmbeddingRequest } from "../../embeddings.js";
import { ShoalError } from "../../errors.js";
import type { Dialect, DialectRequest } from "../../http/dialect.js";
import { badRequest, openAIError } from "./openai-error.js";
import { servedSteps, type ServedModel } from "./served-model.js";

/**
 * One `POST /v1/embeddings` request: its body is checked against {@link EmbeddingRequest} (400
 * otherwise, `dimensions` included, which no model here honours) and its `model` chooses the
 * route; the body then goes to the route's Worker as it came, and the Worker's answer, already in
 * OpenAI's shape, goes to the client as it is: the HTTP thread parses the request (at most
 * `maxBytes` of it) and never the vectors.
 */
export class EmbeddingsDialect implements Dialect {
  constructor(
    readonly models: ReadonlyMap<string, ServedModel>,
    readonly maxBytes: number,
  ) {}

  read(body: Uint8Array): DialectRequest {
    const parsed = EmbeddingRequest.safeParse(parseJsonBody(body));
    if (!parsed.success) throw badRequest(parsed.error);
    const r = parsed.data;
    const steps = servedSteps(this.models, r.model, "embeddings");
    // Cutting a vector short is only right for a model trained for it (Matryoshka); none here is.
    if (r.dimensions !== undefined) throw new ShoalError("BAD_REQUEST", `dimensions: not supported; the model '${r.model}' gives vectors of its own size only (leave dimensions out)`);
    return { payload: body, stream: false, steps };
  }

  error(error: ShoalError): unknown {
    return openAIError(error);
  }
}
