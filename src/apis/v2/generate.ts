import type { TensorMetadata } from "../../v2/types.js";
import type { Dialect, DialectRequest } from "../../http/dialect.js";

/**
 * The V2 generate extension (`/generate`, `/generate_stream`) over a model's V2 inference. Its
 * body goes to the model's worker as it came, told by the request's meta to read it as generate
 * fields typed by the model's inputs and to answer each response (the one answer, or each chunk
 * of a stream) as a JSON object of outputs by name (workers/read-v2-request.ts): the HTTP thread never
 * parses it. A client of `/generate_stream` takes Server-Sent Events.
 */
export class GenerateDialect implements Dialect {
  constructor(
    /** The model's inputs, as far as it knows them yet, to type the request's fields. */
    readonly inputs: readonly TensorMetadata[],
    readonly stream: boolean,
  ) {}

  read(body: Uint8Array): DialectRequest {
    return { payload: body, stream: this.stream, meta: { generate: this.inputs } };
  }
}

/** `/infer_stream`: a V2 inference request whose responses come as Server-Sent Events, one V2 response each. */
export const INFER_STREAM: Dialect = {
  read: (body) => ({ payload: body, stream: true }),
};
