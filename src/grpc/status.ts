import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import type { ErrorDialect, ShoalError } from "../errors.js";

/**
 * A {@link ShoalError} as a gRPC call's error: the status of its row of the error table
 * (errors.ts holds the one mapping, by name), and the same message REST sends as `error`, both
 * in the words of `dialect` (MLServer's, for its models).
 */
export function grpcError(error: ShoalError, requestId?: string, dialect: ErrorDialect = "shoal"): Partial<ServiceError> {
  const metadata = new Metadata();
  if (requestId !== undefined) metadata.set("x-request-id", requestId);
  return { code: status[error.grpcIn(dialect)], details: error.textIn(dialect), metadata };
}
