/**
 * The V2 gRPC service (`inference.GRPCInferenceService`) on `--grpc-port`, with gRPC health
 * checking and server reflection. It serves the models of the same catalog and shared pool as
 * the REST API under `/v2`, through the same V2 data plane, and its inference requests are
 * admitted by the serving core as REST's are.
 */
import type { Http2Server, ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";
import { Server as GrpcServer, ServerCredentials, type ServiceDefinition, type UntypedServiceImplementation, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import type { ServerConfig } from "../config.js";
import { ShoalError } from "../errors.js";
import type { Logger } from "../logger.js";
import { GrpcAnswers } from "./answers.js";
import { Arrivals } from "./arrivals.js";
import { guardConnections } from "./connection-guard.js";
import { HealthService } from "./health-service.js";
import { inflateMessages } from "./inflate-messages.js";
import { PREFIX } from "./message-frames.js";
import { modelConfig } from "./model-config.js";
import { tolerant, Undecodable } from "./decode.js";
import { GrpcInference } from "./inference.js";
import { loadProtos } from "./protos.js";
import { grpcError } from "./status.js";
import type { Door, ServingCore } from "../serving/core.js";
import { RouteModel } from "../serving/route-model.js";

/** The V2 service's full name, also its name for health checking. */
export const SERVICE = "inference.GRPCInferenceService";
// How often health checking looks at readiness, for Watch calls.
const HEALTH_POLL_MS = 1000;


type Unary = (call: ServerUnaryCall<any, unknown>) => unknown;

/** The V2 gRPC front. */
export class GrpcFront implements Door {
  readonly #server: GrpcServer;
  readonly #health = new HealthService(["", SERVICE]);
  readonly #log: Logger;
  readonly #poll: NodeJS.Timeout;
  readonly #answers: GrpcAnswers;
  readonly #arrivals: Arrivals;
  // The paths of the calls whose requests stream (ModelStreamInfer, reflection's), as every
  // service is added.
  readonly #streaming = new Set<string>();
  // Each listener's: ends its connections that have not sent a byte yet (grpc-js knows only sessions).
  readonly #waiting: (() => void)[] = [];

  constructor(
    readonly core: ServingCore,
    readonly config: ServerConfig,
    logger: Logger,
  ) {
    this.#log = logger;
    const definition = loadProtos();
    this.#answers = new GrpcAnswers(config.grpcCompression, SERVICE, logger);
    const refused = () => core.metrics.answered("/v2/models/infer", 429, 0, "grpc");
    this.#arrivals = new Arrivals({ admission: core.admission, requestTimeoutMs: config.requestTimeoutMs, refused }, (path) => this.#streaming.has(path));
    this.#server = new GrpcServer({
      // grpc-js inflates a compressed message up to this size too.
      "grpc.max_receive_message_length": config.maxRequestSize,
      "grpc.max_concurrent_streams": config.grpcMaxStreams,
      "grpc.max_connection_idle_ms": config.grpcIdleTimeoutMs,
      "grpc.keepalive_time_ms": config.grpcKeepAliveTimeMs,
      "grpc.keepalive_timeout_ms": config.grpcKeepAliveTimeoutMs,
      // Nothing reads channelz here, and grpc-js counts every call and message for it.
      "grpc.enable_channelz": 0,
      // The first two are given grpc-js's own call object (the first returns it as it is).
      interceptors: [inflateMessages(config.maxRequestSize), this.#answers.interceptor, this.#arrivals.interceptor],
    });
    const { plane } = core;
    const inference = new GrpcInference(core, config.timeoutMs, config.maxRequestSize, config.maxInflightBytes, config.tenantKey);
    const unary: Record<string, Unary> = {
      ServerLive: () => ({ live: true }),
      ServerReady: () => ({ ready: plane.notReady() === undefined }),
      ModelReady: ({ request }) => ({ ready: plane.modelNotReady(plane.find(request.name, request.version)) === undefined }),
      ServerMetadata: () => plane.serverMetadata(),
      ModelMetadata: ({ request }) => plane.metadataOf(plane.find(request.name, request.version)),
      ModelConfig: ({ request }) => {
        const target = plane.find(request.name, request.version);
        // A model that has not loaded yet still has its configuration, without tensors.
        return { config: modelConfig(target, target instanceof RouteModel || target.metadata !== undefined ? plane.metadataOf(target) : undefined) };
      },
      ModelStatistics: ({ request }) => ({ model_stats: plane.statistics(request.name === "" ? undefined : plane.find(request.name, request.version)) }),
      RepositoryIndex: ({ request }) => ({ models: plane.index(request.ready === true).map((e) => ({ ...e, version: e.version ?? "" })) }),
      RepositoryModelLoad: (call) => this.#control(call, "load"),
      RepositoryModelUnload: (call) => this.#control(call, "unload"),
    };
    const handlers: UntypedServiceImplementation = {
      ModelInfer: (call: ServerUnaryCall<any, any>, callback: sendUnaryData<any>) => this.#guard(callback, () => inference.unary(call, callback)),
      ModelStreamInfer: (call: Parameters<GrpcInference["stream"]>[0]) => this.#guard(undefined, () => inference.stream(call), () => call.destroy()),
    };
    for (const [name, handler] of Object.entries(unary)) {
      handlers[name] = (call: ServerUnaryCall<any, unknown>, callback: sendUnaryData<unknown>) =>
        this.#guard(
          callback,
          () => {
            if (call.request instanceof Undecodable) throw call.request.error;
            const result = handler(call);
            if (result instanceof Promise) result.then((value) => callback(null, value), (err: unknown) => this.#fail(callback, err, modelOf(call.request)));
            else callback(null, result);
          },
          undefined,
          modelOf(call.request),
        );
    }
    const addService = this.#server.addService.bind(this.#server);
    this.#server.addService = (service, implementation) => {
      for (const method of Object.values(service)) if (method.requestStream) this.#streaming.add(method.path);
      addService(service, implementation);
    };
    this.#server.addService(this.#answers.service(tolerant(definition[SERVICE] as ServiceDefinition, config)), handlers);
    this.#health.addToServer(this.#server);
    new ReflectionService(definition).addToServer(this.#server);
    this.#poll = setInterval(() => this.#refresh(), HEALTH_POLL_MS).unref();
    this.#refresh();
  }

  /** Starts listening on `--grpc-port`; rejects with a one-line message when the port cannot be had. */
  async start(): Promise<void> {
    const port = await this.#listen();
    this.#log.info({ address: this.config.address, grpcPort: port }, `gRPC listening on ${this.config.address}:${port}`);
  }

  #listen(): Promise<number> {
    const { address, grpcPort } = this.config;
    const host = address.includes(":") ? `[${address}]` : address;
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(`${host}:${grpcPort}`, ServerCredentials.createInsecure(), (err, port) => {
        if (err === null) {
          for (const listener of http2Listeners(this.#server)) {
            // A request's gRPC frame: its message and 5 bytes of length prefix.
            widenWindows(listener, this.config.maxRequestSize + PREFIX);
            this.#arrivals.watch(listener);
            this.#answers.watch(listener);
            this.#waiting.push(guardConnections(listener, this.config));
            // As on the REST port, and for each port on its own, so that a flood of one leaves the
            // other (and its health probes) reachable: net.Server closes connections past it as
            // soon as they are accepted.
            if (this.config.maxConnections > 0) listener.maxConnections = this.config.maxConnections;
            // node:http sets TCP_NODELAY on its sockets (and gRPC's C core on its own), node:http2
            // does not: small frames (trailers, WINDOW_UPDATE) go out at once, not after an ACK.
            listener.on("connection", (socket: Socket) => socket.setNoDelay(true));
          }
          resolve(port);
        } else reject(new Error(/in use/i.test(err.message) ? `${address}:${grpcPort} is already in use; choose another port with --grpc-port` : `cannot listen on ${address}:${grpcPort} for gRPC: ${err.message}`));
      });
    });
  }

  /** Draining: health checks say NOT_SERVING; inference calls are refused UNAVAILABLE by the admission. */
  drain(): void {
    this.#refresh();
  }

  /** Ends every call and releases the port. */
  close(): void {
    clearInterval(this.#poll);
    this.#server.forceShutdown();
    for (const end of this.#waiting) end();
  }

  /** Every worker is ready: health checks say so now rather than at the next look. */
  ready(): void {
    this.#refresh();
  }

  // Health checking follows readiness (looked at every second, and when told); watchers hear of changes only.
  #refresh(): void {
    this.#health.set(this.core.plane.notReady() === undefined ? "SERVING" : "NOT_SERVING");
  }

  // Load and unload: the REST API's rules, the token as `authorization` metadata.
  #control(call: ServerUnaryCall<{ model_name: string }, unknown>, action: "load" | "unload"): Promise<object> {
    const token = call.metadata.get("authorization")[0];
    const refused = this.core.plane.mayControl(undefined, typeof token === "string" ? token : undefined);
    if (refused !== undefined) throw refused.error;
    // Health checking hears of the change at once, not at the next look.
    return this.core.plane.control(action, call.request.model_name).then(() => {
      this.#refresh();
      return {};
    });
  }

  // A handler's error as its call's status, in the words of the model it is about (MLServer's
  // for its models); anything but a ShoalError is a bug of ours: INTERNAL, logged.
  #fail(callback: sendUnaryData<unknown>, err: unknown, model?: string): void {
    if (!(err instanceof ShoalError)) this.#log.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, "gRPC handler failed");
    const error = err instanceof ShoalError ? err : new ShoalError("SERVER", "the request could not be handled");
    callback(grpcError(error, undefined, model === undefined ? "shoal" : this.core.plane.dialectOf(model)));
  }

  // Runs a handler so that nothing it throws reaches the process: a unary call is answered with
  // the error, a stream (`callback` undefined) is ended.
  #guard(callback: sendUnaryData<any> | undefined, fn: () => void, end?: () => void, model?: string): void {
    try {
      fn();
    } catch (err) {
      if (callback !== undefined) this.#fail(callback, err, model);
      else {
        this.#log.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, "gRPC handler failed");
        end?.();
      }
    }
  }
}

// The model a call's request names (`name`, or a repository call's `model_name`), if any.
function modelOf(request: unknown): string | undefined {
  const fields = request as { name?: unknown; model_name?: unknown } | null;
  const name = fields?.name ?? fields?.model_name;
  return typeof name === "string" && name !== "" ? name : undefined;
}

// The server's HTTP/2 listeners, which @grpc/grpc-js keeps as `http2Servers` and does not expose;
// none when it no longer does (large tensors then wait on flow control, and answers go
// uncompressed).
function http2Listeners(server: GrpcServer): Http2Server[] {
  const listeners = (server as unknown as { http2Servers?: unknown }).http2Servers;
  return listeners instanceof Map ? [...listeners.keys()].filter((l): l is Http2Server => typeof (l as Partial<Http2Server>)?.prependListener === "function") : [];
}

// Large tensors: node:http2 lets a sender have 64 KiB in flight on a stream and on a connection
// before it must wait for the receiver's WINDOW_UPDATE, and @grpc/grpc-js has no server option to
// raise it (its client has grpc-node.flow_control_window): a 1 MiB tensor took 16 round trips.
// Each session of the listener gets windows the size of the largest request (--max-request-size),
// so a request arrives in one go; what arrives is still bounded by that size and the byte budget.
function widenWindows(listener: Http2Server, bytes: number): void {
  const window = Math.min(bytes, 2 ** 31 - 1);
  listener.on("session", (session: ServerHttp2Session) => {
    if (typeof session.setLocalWindowSize !== "function") return;
    session.setLocalWindowSize(window);
    session.settings({ initialWindowSize: window });
  });
}
