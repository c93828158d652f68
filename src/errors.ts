/**
 * The one error table. Every HTTP status and gRPC status Shoal sends comes from here.
 *
 * Errors cross thread and process boundaries as `{ code, message }` (structured clone drops the
 * class), and are rebuilt on the coordinator with {@link errorFromWire}, so this table stays the
 * only authority on status codes and message prefixes.
 */

/**
 * The gRPC status codes an error may be answered with (`@grpc/grpc-js` numbers them; the
 * server's gRPC front maps the names).
 */
export type GrpcCode = "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "UNAUTHENTICATED" | "PERMISSION_DENIED" | "NOT_FOUND" | "UNIMPLEMENTED" | "CANCELLED" | "DEADLINE_EXCEEDED" | "ABORTED" | "RESOURCE_EXHAUSTED" | "INTERNAL" | "UNAVAILABLE";

/**
 * A row of the error table: the HTTP status, the gRPC status of the same failure, and the prefix
 * of the message sent to clients.
 */
interface ErrorKind {
  readonly status: number;
  readonly grpc: GrpcCode;
  readonly prefix: string;
}

/** Every failure Shoal knows, by code. */
export const ERRORS = {
  BAD_REQUEST: { status: 400, prefix: "bad request", grpc: "INVALID_ARGUMENT" },
  DECODING: { status: 400, prefix: "decoding error", grpc: "INVALID_ARGUMENT" },
  EMPTY_BODY: { status: 400, prefix: "bad request", grpc: "INVALID_ARGUMENT" },
  UNAUTHORIZED: { status: 401, prefix: "unauthorized", grpc: "UNAUTHENTICATED" },
  FORBIDDEN: { status: 403, prefix: "forbidden", grpc: "PERMISSION_DENIED" },
  NOT_FOUND: { status: 404, prefix: "not found", grpc: "NOT_FOUND" },
  METHOD_NOT_ALLOWED: { status: 405, prefix: "method not allowed", grpc: "UNIMPLEMENTED" },
  TIMEOUT: { status: 408, prefix: "request timeout", grpc: "DEADLINE_EXCEEDED" },
  CONFLICT: { status: 409, prefix: "conflict", grpc: "ABORTED" },
  CANCELLED: { status: 409, prefix: "cancelled", grpc: "CANCELLED" },
  FORWARD_TIMEOUT: { status: 408, prefix: "forward timeout", grpc: "DEADLINE_EXCEEDED" },
  BODY_TOO_LARGE: { status: 413, prefix: "request body is too large", grpc: "RESOURCE_EXHAUSTED" },
  HEADERS_TOO_LARGE: { status: 431, prefix: "request headers are too large", grpc: "RESOURCE_EXHAUSTED" },
  UNSUPPORTED_ENCODING: { status: 415, prefix: "unsupported media type", grpc: "INVALID_ARGUMENT" },
  VALIDATION: { status: 422, prefix: "request validation error", grpc: "INVALID_ARGUMENT" },
  QUEUE_FULL: { status: 429, prefix: "too many requests", grpc: "RESOURCE_EXHAUSTED" },
  SERVER: { status: 500, prefix: "internal error", grpc: "INTERNAL" },
  ENCODING: { status: 500, prefix: "encoding error", grpc: "INTERNAL" },
  INTERNAL: { status: 500, prefix: "inference internal error", grpc: "INTERNAL" },
  WORKER_DIED: { status: 500, prefix: "worker died", grpc: "INTERNAL" },
  SHUTTING_DOWN: { status: 503, prefix: "service unavailable", grpc: "UNAVAILABLE" },
  NOT_READY: { status: 503, prefix: "service unavailable", grpc: "UNAVAILABLE" },
  SLOW_CLIENT: { status: 503, prefix: "stream backlog full", grpc: "UNAVAILABLE" },
} as const satisfies Record<string, ErrorKind>;

/** The code of a row of {@link ERRORS}. */
export type ErrorCode = keyof typeof ERRORS;

/**
 * How an error is put to a client: in Shoal's words (the table's prefix, then the detail), or in
 * MLServer's, for the models served from its format (docs/python.md): the message alone, and
 * gRPC codes as MLServer maps its statuses. The status is the table's in both.
 */
export type ErrorDialect = "shoal" | "mlserver";

// MLServer's gRPC code of each HTTP status where it differs from the table's (its
// grpc/utils.py: 400, 404 and 500 map as the table does; other statuses keep the table's code).
const MLSERVER_GRPC: Readonly<Record<number, GrpcCode>> = { 422: "FAILED_PRECONDITION" };

/**
 * The code of the table's first row with this HTTP status (a runtime that chose a status, as
 * MLServer's `MLServerError(msg, status_code)` does), SERVER for a status the table has not.
 */
export function codeOfStatus(status: number): ErrorCode {
  for (const code in ERRORS) if (ERRORS[code as ErrorCode].status === status) return code as ErrorCode;
  return "SERVER";
}

/**
 * Base class of the errors a Worker may throw (or return at an index of a batch) to choose the
 * status of the response. Any other exception is answered with 500 and logged, never shown.
 */
export class ShoalError extends Error {
  /** A code of the error table; it sets the HTTP status. */
  readonly code: ErrorCode;
  /** When set, the client may try again after this many seconds: sent as `Retry-After` (a 429 or 503 of the queue). */
  retryAfterS: number | undefined;
  /**
   * What a dialect sends in place of the message, when it has one: the `detail` list FastAPI
   * answers for a body MLServer's schema refuses (its 422).
   */
  detail: unknown;

  constructor(code: ErrorCode, message = "") {
    super(message);
    this.code = code;
    this.name = new.target.name;
  }

  /** The HTTP status of this error. */
  get status(): number {
    return ERRORS[this.code].status;
  }

  /** The gRPC status of this error, by name. */
  get grpc(): GrpcCode {
    return ERRORS[this.code].grpc;
  }

  /**
   * Whether the request failed for a reason of the client's: a 4xx. Such a failure is the
   * client's answer, not the operator's concern: logged at most at `debug`, never with a stack.
   * A 408 counts here: the request's own deadline passed; a worker too slow for it is logged once,
   * as a warning, when the pool replaces it.
   */
  get clientFault(): boolean {
    return this.status < 500;
  }

  /** The text sent to the client: the table's prefix, then the detail if there is one. */
  get publicMessage(): string {
    const { prefix } = ERRORS[this.code];
    return this.message ? `${prefix}: ${this.message}` : prefix;
  }

  /** The text a client of `dialect` gets: MLServer's is the message alone (the prefix when there is none). */
  textIn(dialect: ErrorDialect): string {
    return dialect === "mlserver" ? this.message || ERRORS[this.code].prefix : this.publicMessage;
  }

  /** The gRPC status a client of `dialect` gets, by name. */
  grpcIn(dialect: ErrorDialect): GrpcCode {
    return (dialect === "mlserver" ? MLSERVER_GRPC[this.status] : undefined) ?? this.grpc;
  }
}

/**
 * The request is wrong in a way the client can fix: 400.
 * @example throw new ClientError("field 'image' must be base64")
 */
export class ClientError extends ShoalError {
  constructor(message = "") {
    super("BAD_REQUEST", message);
  }
}

/** The request body could not be decoded: 400 `decoding error: …`. */
export class DecodingError extends ShoalError {
  constructor(message = "") {
    super("DECODING", message);
  }
}

/**
 * The request decoded but its content is invalid: 422 `request validation error: …`.
 * @example if (!("x" in req)) throw new ValidationError("cannot find key 'x'");
 */
export class ValidationError extends ShoalError {
  constructor(message = "") {
    super("VALIDATION", message);
  }
}

/** The worker failed in a way it wants the client to see: 500 `internal error: …`, logged with its stack. */
export class ServerError extends ShoalError {
  constructor(message = "") {
    super("SERVER", message);
  }
}

/** The result could not be encoded: 500 `encoding error: …`. */
export class EncodingError extends ShoalError {
  constructor(message = "") {
    super("ENCODING", message);
  }
}

/** An error as it travels between threads and processes. */
export interface WireError {
  code: ErrorCode;
  message: string;
  /** Only for unexpected exceptions: logged by the coordinator, never sent to the client. */
  stack?: string;
  /** An HTTP status the worker chose (an MLServer runtime's): the code is then the table's row of it. */
  status?: number;
  /** {@link ShoalError.detail}. */
  detail?: unknown;
}

/**
 * Turns anything thrown into its wire form. Shoal errors keep their code and text, and those of
 * the server's making (a 5xx) their stack for the log; anything else becomes `fallback` (INTERNAL
 * unless said otherwise) with its stack kept for the log.
 */
export function errorToWire(err: unknown, fallback: ErrorCode = "INTERNAL"): WireError {
  if (err instanceof ShoalError) return err.clientFault ? { code: err.code, message: err.message } : { code: err.code, message: err.message, stack: err.stack ?? err.message };
  const stack = err instanceof Error ? (err.stack ?? String(err)) : String(err);
  if (fallback === "INTERNAL") return { code: fallback, message: "", stack };
  const message = err instanceof Error ? err.message : String(err);
  return { code: fallback, message, stack };
}

/** Rebuilds a {@link ShoalError} from its wire form, on the coordinator. */
export function errorFromWire(wire: WireError): ShoalError {
  const code = typeof wire.status === "number" ? codeOfStatus(wire.status) : wire.code in ERRORS ? wire.code : "INTERNAL";
  const error = new ShoalError(code, wire.message);
  if (wire.detail !== undefined) error.detail = wire.detail;
  return error;
}
