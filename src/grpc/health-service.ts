import { status, type Server, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from "@grpc/grpc-js";
import { service as healthDefinition, type ServingStatus } from "grpc-health-check";

/** Most Watch calls open at once; more are refused RESOURCE_EXHAUSTED. */
export const MAX_WATCHERS = 1000;

type Watcher = ServerWritableStream<{ service: string }, { status: string }>;

/**
 * gRPC health checking (`grpc.health.v1.Health`) for a fixed set of service names, all with the
 * server's one status. Unlike grpc-health-check's own implementation, which keeps an entry for
 * every name it was ever asked about, it keeps nothing per name: a Watch call is held only
 * while it is open, at most {@link MAX_WATCHERS} of them, and a name it does not serve is
 * answered as the protocol says (Check: NOT_FOUND; Watch: SERVICE_UNKNOWN, the call left open).
 */
export class HealthService {
  readonly #names: ReadonlySet<string>;
  readonly #watchers = new Set<Watcher>();
  #status: ServingStatus = "NOT_SERVING";

  /** `names`: the services it answers for ("" is the server as a whole). */
  constructor(names: readonly string[]) {
    this.#names = new Set(names);
  }

  /** Watch calls open now. */
  get watching(): number {
    return this.#watchers.size;
  }

  /** Sets the status of every service; the watchers of the served names hear of a change. */
  set(next: ServingStatus): void {
    if (next === this.#status) return;
    this.#status = next;
    for (const watcher of this.#watchers) if (this.#names.has(watcher.request.service)) watcher.write({ status: next });
  }

  /** Adds the service to `server`. */
  addToServer(server: Server): void {
    server.addService(healthDefinition, {
      check: (call: ServerUnaryCall<{ service: string }, unknown>, callback: sendUnaryData<{ status: string }>) => {
        if (this.#names.has(call.request.service)) callback(null, { status: this.#status });
        else callback({ code: status.NOT_FOUND, details: "unknown service" });
      },
      watch: (call: Watcher) => this.#watch(call),
      list: (_call: unknown, callback: sendUnaryData<{ statuses: Record<string, { status: string }> }>) => {
        callback(null, { statuses: Object.fromEntries([...this.#names].map((name) => [name, { status: this.#status }])) });
      },
    });
  }

  #watch(call: Watcher): void {
    // A stream torn down under us must not become an unhandled error.
    call.on("error", () => {});
    if (this.#watchers.size >= MAX_WATCHERS) {
      call.emit("error", { code: status.RESOURCE_EXHAUSTED, details: `more than ${MAX_WATCHERS} health watchers` });
      return;
    }
    this.#watchers.add(call);
    const leave = () => this.#watchers.delete(call);
    call.once("cancelled", leave);
    call.once("close", leave);
    call.write({ status: this.#names.has(call.request.service) ? this.#status : "SERVICE_UNKNOWN" });
  }
}
