import { randomUUID } from "node:crypto";

// A client's request id is echoed only when it is short and printable; otherwise we make one.
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** The id of a request: the client's `x-request-id` (or gRPC metadata) when it is short and printable, else a new one. */
export function requestIdOf(header: unknown): string {
  return typeof header === "string" && REQUEST_ID.test(header) ? header : randomUUID();
}
