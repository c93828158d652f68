/** A gRPC call that ended with a status other than OK, as the client throws it. */
import { status as Status, type Metadata, type ServiceError } from "@grpc/grpc-js";

/** The HTTP status a gRPC code stands for, where the retry policy needs one: 429 and 503. */
export const RETRY_STATUS: ReadonlyMap<number, number> = new Map([
  [Status.RESOURCE_EXHAUSTED, 429],
  [Status.UNAVAILABLE, 503],
]);

/** A gRPC status other than OK, with the server's message (`details`). */
export class GrpcError extends Error {
  override readonly name = "GrpcError";
  /** The status code (`@grpc/grpc-js`'s `status`: 5 NOT_FOUND, 8 RESOURCE_EXHAUSTED, ...). */
  readonly code: number;
  /** The code's name: `NOT_FOUND`, `UNAUTHENTICATED`, ... */
  readonly codeName: string;
  /** The server's message. */
  readonly details: string;
  /** The trailers the call ended with. */
  readonly metadata: Metadata | undefined;

  constructor(err: Pick<ServiceError, "code" | "details" | "metadata">) {
    super(err.details);
    this.code = err.code;
    this.codeName = Status[err.code] ?? String(err.code);
    this.details = err.details;
    this.metadata = err.metadata;
  }
}
