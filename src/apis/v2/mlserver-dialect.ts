import type { ShoalError } from "../../errors.js";
import type { Dialect } from "../../http/dialect.js";
import { INFER_STREAM } from "./generate.js";

/**
 * An error as MLServer's REST server answers it: `{"error": "<its message>"}` without Shoal's
 * prefix, or FastAPI's `{"detail": [...]}` for a body MLServer's types refused (its 422).
 */
export function mlserverError(error: ShoalError): unknown {
  return error.detail === undefined ? { error: error.textIn("mlserver") } : { detail: error.detail };
}

/**
 * `/infer` and `/generate` of a model in MLServer's format: the body and answer as they are (the
 * model's worker reads and writes MLServer's V2), errors as MLServer answers them. MLServer's
 * generate is its infer, so the generate extension's fields are not read here.
 */
export const MLSERVER_INFER: Dialect = { error: mlserverError };

/** `/infer_stream` and `/generate_stream` of a model in MLServer's format: V2 responses as Server-Sent Events, errors as MLServer's. */
export const MLSERVER_STREAM: Dialect = { ...INFER_STREAM, error: mlserverError };
