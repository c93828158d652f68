/**
 * The V2 service's `.proto` files, loaded at run time by proto-loader: shared by the server's gRPC
 * door and the package's gRPC client, so both read the messages the same way.
 */
import { fileURLToPath } from "node:url";
import { loadSync, type PackageDefinition } from "@grpc/proto-loader";
import { protoPath as healthProto } from "grpc-health-check";

/** The folder of the `.proto` files, shipped in the package. */
export const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

/** The `.proto` files loaded as messages are handed to handlers: field names as written, 64-bit integers as strings, every field present. */
export function loadProtos(): PackageDefinition {
  return loadSync(["grpc_service.proto", healthProto], { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, arrays: true, objects: true, oneofs: true });
}
