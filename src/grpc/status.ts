import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import type { ShoalError } from "../errors.js";

/**
 * A {@link ShoalError} as a gRPC call's error: the status of its row of the error table
 * (errors.ts holds the one mapping, by name), and the same message REST sends as `error`.
 */
export function grpcError(error: ShoalError, requestId?: string): Partial<ServiceError> {
  const metadata = new Metadata();
  if (requestId !== undefined) metadata.set("x-request-id", requestId);
  return { code: status[error.grpc], details: error.publicMessage, metadata };
}
