import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { bucketList, fraction, integer, metricPrefix, modelName, originList, parseTenantKey, tenantKey, type TenantKey } from "./flag-values.js";
import { BATCH_BUCKETS, LATENCY_BUCKETS } from "./metrics/buckets.js";

/** Server-wide settings: CLI flags, then `SHOAL_*` environment variables, then defaults. */
export interface ServerConfig {
  /** TCP port (0 picks a free one). */
  port: number;
  /** TCP port of the V2 gRPC service (0: no gRPC service). */
  grpcPort: number;
  /** Which gRPC answers of 1 KiB or more go gzip-compressed to clients that accept gzip: those to calls whose request came compressed, all, or none. */
  grpcCompression: "request" | "always" | "never";
  /** Address to listen on. */
  address: string;
  /** Each request's deadline from arrival, queueing included, in ms; for a stream, the deadline of its first chunk. */
  timeoutMs: number;
  /** A stream's deadline from the request's arrival to its last chunk, in ms. */
  streamTimeoutMs: number;
  /** How often an idle Server-Sent Events stream gets a keep-alive comment, in ms. */
  sseKeepAliveMs: number;
  /** Most items a stage may hold queued; more are refused with 429. */
  capacity: number;
  /** Where a request names its tenant, for the queues that share between tenants (docs/scheduling.md); undefined: requests name none. */
  tenantKey: TenantKey | undefined;
  /** Largest request body in bytes; larger ones are refused with 413. */
  maxRequestSize: number;
  /** Largest body the OpenAI routes parse on the HTTP thread, in bytes: a request's (larger: 413) or a Worker's answer or chunk (larger: 500). */
  maxOpenAISize: number;
  /** Least severe log level written. */
  logLevel: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /** `json` (one object a line) or `pretty` (readable lines); default: pretty on a terminal. */
  logFormat: "json" | "pretty";
  /** Prefix of every Prometheus metric name. */
  namespace: string;
  /** Upper bounds of the duration histograms' buckets, in seconds, ascending. */
  latencyBuckets: number[];
  /** Upper bounds of the batch-size histograms' buckets, ascending. */
  batchSizeBuckets: number[];
  /** Start one worker per stage, run each route's example through its pipeline, report, exit. */
  dryRun: boolean;
  /** A model repository folder to serve with the V2 protocol, besides models added in code. */
  modelRepository: string | undefined;
  /** The name of the model when the repository folder is itself one model's folder (KServe's `/mnt/models`). */
  modelName: string | undefined;
  /** Workers of the shared pool that hosts the models. */
  workers: number;
  /** Python workers of the shared pool, for the models of a Python runtime (default: an MLServer `settings.json`'s `parallel_workers`, else 1). */
  pythonWorkers: number | undefined;
  /** How the shared pool runs its workers: threads, or processes. */
  modelIsolation: "thread" | "process";
  /** What the models loaded in the shared pool may cost together, in bytes (0: no budget). */
  modelMemoryBytes: number;
  /** `none`: the repository's models load at start and load/unload answer 403; `explicit`: load/unload are open. */
  modelControl: "none" | "explicit";
  /** When set, control requests (load, unload) need `Authorization: Bearer <token>`. */
  adminToken: string | undefined;
  /** Browser origins given CORS headers (`*`: any); load/unload only from origins listed by name. */
  corsOrigins: string[];
  /** Deadline of a control request (load, unload), in ms. */
  controlTimeoutMs: number;
  /** Most tensor elements one request may hold (all inputs together). */
  maxTensorElements: number;
  /** Most BYTES (string) elements one request may hold. */
  maxBytesElements: number;
  /** Request body bytes the server may hold at once; beyond it, requests get 429 unread. */
  maxInflightBytes: number;
  /** Time a client has to send a request's headers, in ms; then 408. */
  headersTimeoutMs: number;
  /** Time a client has to send a whole request, body included, in ms; then 408. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open, in ms. */
  keepAliveTimeoutMs: number;
  /** Most open connections; more are closed at once (0: no limit). */
  maxConnections: number;
  /** How long a gRPC connection with no call open stays open before it is closed with GOAWAY, in ms. */
  grpcIdleTimeoutMs: number;
  /** Most calls open at once on one gRPC connection. */
  grpcMaxStreams: number;
  /** How often the server pings a gRPC connection to see that its client is still there, in ms. */
  grpcKeepAliveTimeMs: number;
  /** How long the server waits for a keep-alive ping's answer before it closes the connection, in ms. */
  grpcKeepAliveTimeoutMs: number;
  /** Least time between a client's pings on a gRPC connection with no call open, in ms; the third ping sooner closes it. */
  grpcMinPingIntervalMs: number;
  /** Write one `access` log line per inference request answered. */
  accessLog: boolean;
  /** Serve the live dashboard at `/dashboard`. */
  dashboard: boolean;
  /** The share of answered requests the access log writes, from 0 to 1. */
  accessLogSample: number;
  /** Worker restarts within `restartWindowMs` beyond which `/healthz` answers 503 (0: never). */
  maxRestarts: number;
  /** The window `maxRestarts` counts in, in ms. */
  restartWindowMs: number;
  /** After a busy spell, how long the server must be idle before a garbage collection gives spare heap back, in ms (0: never). */
  idleGcMs: number;
  /** Set when the server answers as a Mosec server does: by the Python launcher `shoal.mosec` (`shoal python --mosec`), no flag of its own. */
  mosec: MosecCompat | undefined;
}

/**
 * What a server started by `shoal.mosec` (Mosec's user API in Python) does as Mosec does
 * (docs/python.md): its routes' errors as bare text and its Server-Sent Events' errors as
 * Mosec's events, Mosec's metric series beside Shoal's, and Mosec's OpenAPI document.
 */
export interface MosecCompat {
  /** The prefix of Mosec's metric names (Mosec's `--namespace`: `mosec_service`). */
  namespace: string;
  /** Mosec's OpenAPI document of the routes, served at `/openapi/metadata.json`. */
  openapi?: Record<string, unknown>;
}

export { integer, parseTenantKey, type TenantKey };

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/**
 * The server flags, each with its environment variable; also what `--help` prints. One table for
 * `Server.run()` and for the `shoal` command.
 */
function flags(defaults: ServerConfig): Option[] {
  return [
    new Option("--port <number>", "TCP port to listen on (0: any free port)").env("SHOAL_PORT").argParser(integer(0, 65535)).default(defaults.port),
    new Option("--grpc-port <number>", "TCP port of the V2 gRPC service, served when there are models or routes served as models (0: none)").env("SHOAL_GRPC_PORT").argParser(integer(0, 65535)).default(defaults.grpcPort),
    new Option("--grpc-compression <when>", "gzip the gRPC answers of 1 KiB or more, for clients that accept gzip: request (to calls whose request came compressed), always, never").env("SHOAL_GRPC_COMPRESSION").choices(["request", "always", "never"]).default(defaults.grpcCompression),
    new Option("--address <host>", "address to listen on").env("SHOAL_ADDRESS").default(defaults.address),
    new Option("--timeout <ms>", "deadline of each request from its arrival, queueing included (of a stream: its first chunk)").env("SHOAL_TIMEOUT").argParser(integer(1)).default(defaults.timeoutMs),
    new Option("--stream-timeout <ms>", "deadline of a stream, from the request's arrival to its last chunk").env("SHOAL_STREAM_TIMEOUT").argParser(integer(1)).default(defaults.streamTimeoutMs),
    new Option("--sse-keep-alive <ms>", "how often an idle Server-Sent Events stream gets a keep-alive comment").env("SHOAL_SSE_KEEP_ALIVE").argParser(integer(1)).default(defaults.sseKeepAliveMs),
    new Option("--capacity <items>", "most items each stage may hold queued; more get 429").env("SHOAL_CAPACITY").argParser(integer(1)).default(defaults.capacity),
    new Option("--tenant-key <where>", "where a request names its tenant, for queues with tenantWeights: header:NAME, parameter:NAME (gRPC V2 parameter; on HTTP the header NAME) or api-key").env("SHOAL_TENANT_KEY").argParser(tenantKey).default(defaults.tenantKey),
    new Option("--max-request-size <bytes>", "largest request body; larger ones get 413").env("SHOAL_MAX_REQUEST_SIZE").argParser(integer(1)).default(defaults.maxRequestSize),
    new Option("--max-openai-size <bytes>", "largest body the OpenAI routes parse: a request's (larger ones get 413), or a Worker's answer or chunk (larger ones fail the request)").env("SHOAL_MAX_OPENAI_SIZE").argParser(integer(1)).default(defaults.maxOpenAISize),
    new Option("--log-level <level>", "least severe log level written").env("SHOAL_LOG_LEVEL").choices(LOG_LEVELS).default(defaults.logLevel),
    new Option("--log-format <format>", "json, or pretty for readable lines").env("SHOAL_LOG_FORMAT").choices(["json", "pretty"]).default(defaults.logFormat),
    new Option("--dry-run", "start one worker per stage, send each route's example through its pipeline, load every model once, print timings and exit").env("SHOAL_DRY_RUN").default(defaults.dryRun),
    new Option("--namespace <prefix>", "prefix of every Prometheus metric name").env("SHOAL_NAMESPACE").argParser(metricPrefix).default(defaults.namespace),
    new Option("--latency-buckets <seconds>", "upper bounds of the buckets of every duration histogram, comma-separated, in seconds").env("SHOAL_LATENCY_BUCKETS").argParser(bucketList).default(defaults.latencyBuckets, defaults.latencyBuckets.join(",")),
    new Option("--batch-size-buckets <sizes>", "upper bounds of the buckets of every batch-size histogram, comma-separated").env("SHOAL_BATCH_SIZE_BUCKETS").argParser(bucketList).default(defaults.batchSizeBuckets, defaults.batchSizeBuckets.join(",")),
    new Option("--model-repository <dir>", "serve every model of this folder with the V2 protocol").env("SHOAL_MODEL_REPOSITORY").default(defaults.modelRepository),
    new Option("--model-name <name>", "the model's name when --model-repository is itself one model's folder (default: its settings' name, else the folder's name)").env("SHOAL_MODEL_NAME").argParser(modelName).default(defaults.modelName),
    new Option("--workers <n>", "workers of the shared pool that hosts the models").env("SHOAL_WORKERS").argParser(integer(1)).default(defaults.workers),
    new Option("--python-workers <n>", "Python workers of the shared pool, for models of a Python runtime (default: settings.json's parallel_workers, else 1)").env("SHOAL_PYTHON_WORKERS").argParser(integer(1)),
    new Option("--model-isolation <kind>", "run the shared pool's workers as threads or processes").env("SHOAL_MODEL_ISOLATION").choices(["thread", "process"]).default(defaults.modelIsolation),
    new Option("--model-memory-bytes <bytes>", "what loaded models may cost together; the least recently used idle ones are evicted (0: no budget)").env("SHOAL_MODEL_MEMORY_BYTES").argParser(integer(0)).default(defaults.modelMemoryBytes),
    new Option("--model-control <mode>", "none: the repository's models load at start and load/unload are refused (403); explicit: load/unload are open").env("SHOAL_MODEL_CONTROL").choices(["none", "explicit"]).default(defaults.modelControl),
    new Option("--admin-token <token>", "control requests (load, unload) need 'Authorization: Bearer <token>'").env("SHOAL_ADMIN_TOKEN").default(defaults.adminToken),
    new Option("--admin-token-file <path>", "read the admin token from this file (a mounted secret)").env("SHOAL_ADMIN_TOKEN_FILE"),
    new Option("--cors-origins <origins>", "comma-separated browser origins given CORS headers, or *; load/unload only from origins listed by name").env("SHOAL_CORS_ORIGINS").argParser(originList).default(defaults.corsOrigins),
    new Option("--control-timeout <ms>", "deadline of a control request (load, unload)").env("SHOAL_CONTROL_TIMEOUT").argParser(integer(1)).default(defaults.controlTimeoutMs),
    new Option("--max-tensor-elements <n>", "most tensor elements one request may hold (default: --max-request-size)").env("SHOAL_MAX_TENSOR_ELEMENTS").argParser(integer(1)),
    new Option("--max-bytes-elements <n>", "most BYTES (string) elements one request may hold").env("SHOAL_MAX_BYTES_ELEMENTS").argParser(integer(1)).default(defaults.maxBytesElements),
    new Option("--max-inflight-bytes <bytes>", "request body bytes held at once; beyond it, requests get 429 unread (default: 16 x --max-request-size)").env("SHOAL_MAX_INFLIGHT_BYTES").argParser(integer(1)),
    new Option("--headers-timeout <ms>", "time a client has to send a request's headers; then 408").env("SHOAL_HEADERS_TIMEOUT").argParser(integer(1)).default(defaults.headersTimeoutMs),
    new Option("--request-timeout <ms>", "time a client has to send a whole request, body included; then 408").env("SHOAL_REQUEST_TIMEOUT").argParser(integer(1)).default(defaults.requestTimeoutMs),
    new Option("--keep-alive-timeout <ms>", "how long an idle keep-alive connection stays open").env("SHOAL_KEEP_ALIVE_TIMEOUT").argParser(integer(1)).default(defaults.keepAliveTimeoutMs),
    new Option("--max-connections <n>", "most open connections; more are closed at once (0: no limit)").env("SHOAL_MAX_CONNECTIONS").argParser(integer(0)).default(defaults.maxConnections),
    new Option("--grpc-idle-timeout <ms>", "how long a gRPC connection with no call open stays open; then it is closed with GOAWAY").env("SHOAL_GRPC_IDLE_TIMEOUT").argParser(integer(1)).default(defaults.grpcIdleTimeoutMs),
    new Option("--grpc-max-streams <n>", "most calls open at once on one gRPC connection; more are refused").env("SHOAL_GRPC_MAX_STREAMS").argParser(integer(1)).default(defaults.grpcMaxStreams),
    new Option("--grpc-keepalive-time <ms>", "how often the server pings a gRPC connection to see that its client is still there").env("SHOAL_GRPC_KEEPALIVE_TIME").argParser(integer(1)).default(defaults.grpcKeepAliveTimeMs),
    new Option("--grpc-keepalive-timeout <ms>", "how long a keep-alive ping may go unanswered before the connection is closed").env("SHOAL_GRPC_KEEPALIVE_TIMEOUT").argParser(integer(1)).default(defaults.grpcKeepAliveTimeoutMs),
    new Option("--grpc-min-ping-interval <ms>", "least time between a client's pings on a gRPC connection with no call open; the third ping sooner closes it").env("SHOAL_GRPC_MIN_PING_INTERVAL").argParser(integer(0)).default(defaults.grpcMinPingIntervalMs),
    new Option("--access-log", "log one 'access' line per inference request answered").env("SHOAL_ACCESS_LOG").default(defaults.accessLog),
    new Option("--dashboard", "serve the live dashboard at /dashboard (and its data at /dashboard/metrics.json)").env("SHOAL_DASHBOARD").default(defaults.dashboard),
    new Option("--access-log-sample <rate>", "the share of answered requests the access log writes, from 0 to 1").env("SHOAL_ACCESS_LOG_SAMPLE").argParser(fraction).default(defaults.accessLogSample),
    new Option("--max-restarts <n>", "more worker restarts than this within --restart-window make /healthz answer 503, so that the orchestrator replaces the server (0: never)").env("SHOAL_MAX_RESTARTS").argParser(integer(0)).default(defaults.maxRestarts),
    new Option("--restart-window <ms>", "the window --max-restarts counts in").env("SHOAL_RESTART_WINDOW").argParser(integer(1)).default(defaults.restartWindowMs),
    new Option("--idle-gc <ms>", "after a busy spell, once the server has been idle this long, one garbage collection gives the heap's spare memory back (0: never)").env("SHOAL_IDLE_GC").argParser(integer(0)).default(defaults.idleGcMs),
  ];
}

/** The built-in defaults. */
export function defaultConfig(): ServerConfig {
  return {
    port: 8000,
    grpcPort: 8001,
    grpcCompression: "request",
    address: "0.0.0.0",
    timeoutMs: 3000,
    streamTimeoutMs: 300_000,
    sseKeepAliveMs: 15_000,
    capacity: 1024,
    tenantKey: undefined,
    maxRequestSize: 10 * 1024 * 1024,
    // Parsed on the HTTP thread: 256 KiB costs it at most about 8 ms (docs/security.md).
    maxOpenAISize: 256 * 1024,
    logLevel: "info",
    logFormat: process.stdout.isTTY ? "pretty" : "json",
    namespace: "shoal",
    latencyBuckets: [...LATENCY_BUCKETS],
    batchSizeBuckets: [...BATCH_BUCKETS],
    dryRun: false,
    modelRepository: undefined,
    modelName: undefined,
    workers: 1,
    pythonWorkers: undefined,
    modelIsolation: "thread",
    modelMemoryBytes: 0,
    modelControl: "none",
    adminToken: undefined,
    corsOrigins: [],
    controlTimeoutMs: 60_000,
    maxTensorElements: 10 * 1024 * 1024,
    maxBytesElements: 65_536,
    maxInflightBytes: 16 * 10 * 1024 * 1024,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5_000,
    maxConnections: 4096,
    // gRPC clients keep channels idle for long, and reconnect after a GOAWAY at their next call.
    grpcIdleTimeoutMs: 300_000,
    grpcMaxStreams: 100,
    grpcKeepAliveTimeMs: 60_000,
    grpcKeepAliveTimeoutMs: 20_000,
    // The default of gRPC's own servers (C core, Go): a client's keep-alive is for busy connections.
    grpcMinPingIntervalMs: 300_000,
    accessLog: false,
    accessLogSample: 1,
    // Off: the page shows routes, models and traffic to whoever reaches the port (docs/observability.md).
    dashboard: false,
    maxRestarts: 0,
    restartWindowMs: 300_000,
    // Long enough that the pauses between bursts of real traffic (and a benchmark's turns) do not
    // collect: a collection shrinks the young generation, which the next burst pays to grow again.
    idleGcMs: 30_000,
    mosec: undefined,
  };
}

/** Adds the server flags to `command`, with `defaults` over the built-in ones. */
export function addServerFlags(command: Command, defaults: Partial<ServerConfig> = {}): Command {
  for (const option of flags({ ...defaultConfig(), ...defaults })) command.addOption(option);
  return command;
}

/**
 * The configuration from the options of a command parsed with {@link addServerFlags}, over
 * `defaults` for the limits that are derived from others when not given.
 */
export function serverConfigOf(command: Command, defaults: Partial<ServerConfig> = {}): ServerConfig {
  const o = command.opts();
  return {
    port: o.port,
    grpcPort: o.grpcPort,
    grpcCompression: o.grpcCompression,
    address: o.address,
    timeoutMs: o.timeout,
    streamTimeoutMs: o.streamTimeout,
    sseKeepAliveMs: o.sseKeepAlive,
    capacity: o.capacity,
    tenantKey: o.tenantKey,
    maxRequestSize: o.maxRequestSize,
    maxOpenAISize: o.maxOpenaiSize,
    logLevel: o.logLevel,
    logFormat: o.logFormat,
    namespace: o.namespace,
    latencyBuckets: o.latencyBuckets,
    batchSizeBuckets: o.batchSizeBuckets,
    dryRun: Boolean(o.dryRun),
    modelRepository: o.modelRepository,
    modelName: o.modelName,
    workers: o.workers,
    pythonWorkers: o.pythonWorkers,
    modelIsolation: o.modelIsolation,
    modelMemoryBytes: o.modelMemoryBytes,
    modelControl: o.modelControl,
    adminToken: o.adminTokenFile === undefined ? o.adminToken : readToken(o.adminTokenFile),
    corsOrigins: o.corsOrigins,
    controlTimeoutMs: o.controlTimeout,
    // Limits derived from the body limit unless given: one element per body byte, 16 bodies at once.
    maxTensorElements: o.maxTensorElements ?? defaults.maxTensorElements ?? o.maxRequestSize,
    maxBytesElements: o.maxBytesElements,
    maxInflightBytes: o.maxInflightBytes ?? defaults.maxInflightBytes ?? 16 * o.maxRequestSize,
    headersTimeoutMs: o.headersTimeout,
    requestTimeoutMs: o.requestTimeout,
    keepAliveTimeoutMs: o.keepAliveTimeout,
    maxConnections: o.maxConnections,
    grpcIdleTimeoutMs: o.grpcIdleTimeout,
    grpcMaxStreams: o.grpcMaxStreams,
    grpcKeepAliveTimeMs: o.grpcKeepaliveTime,
    grpcKeepAliveTimeoutMs: o.grpcKeepaliveTimeout,
    grpcMinPingIntervalMs: o.grpcMinPingInterval,
    accessLog: Boolean(o.accessLog),
    dashboard: Boolean(o.dashboard),
    accessLogSample: o.accessLogSample,
    maxRestarts: o.maxRestarts,
    restartWindowMs: o.restartWindow,
    idleGcMs: o.idleGc,
    mosec: defaults.mosec,
  };
}

// The admin token from a file (a Kubernetes secret), without the line end editors add.
function readToken(path: string): string {
  let token: string;
  try {
    token = readFileSync(path, "utf8").trim();
  } catch (err) {
    throw new Error(`--admin-token-file: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (token.length === 0) throw new Error(`--admin-token-file: ${path} is empty`);
  return token;
}

/**
 * Reads the configuration from `argv` and the environment over `defaults`. Prints help and exits
 * on `--help`; prints a one-line error and exits 1 on a bad value or unknown flag.
 */
export function loadConfig(argv: readonly string[], defaults: Partial<ServerConfig> = {}, describe = ""): ServerConfig {
  const program = new Command("shoal")
    .description(describe || "Serve Workers over HTTP with dynamic batching.")
    .helpOption("-h, --help", "show this help")
    .allowExcessArguments(false)
    .showHelpAfterError(false);
  addServerFlags(program, defaults);
  program.parse(argv as string[], { from: "user" });
  return serverConfigOf(program, defaults);
}
