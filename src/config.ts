import { Command, InvalidArgumentError, Option } from "commander";

/** Server-wide settings: CLI flags, then `SHOAL_*` environment variables, then defaults. */
export interface ServerConfig {
  /** TCP port (0 picks a free one). */
  port: number;
  /** Address to listen on. */
  address: string;
  /** Each request's deadline from arrival, queueing included, in ms. */
  timeoutMs: number;
  /** Most items a stage may hold queued; more are refused with 429. */
  capacity: number;
  /** Largest request body in bytes; larger ones are refused with 413. */
  maxRequestSize: number;
  /** Least severe log level written. */
  logLevel: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /** `json` (one object a line) or `pretty` (readable lines); default: pretty on a terminal. */
  logFormat: "json" | "pretty";
  /** Prefix of every Prometheus metric name. */
  namespace: string;
  /** Start one worker per stage, run each route's example through its pipeline, report, exit. */
  dryRun: boolean;
  /** A model repository folder to serve with the V2 protocol, besides models added in code. */
  modelRepository: string | undefined;
  /** Workers of the shared pool that hosts the models. */
  workers: number;
  /** How the shared pool runs its workers: threads, or processes. */
  modelIsolation: "thread" | "process";
  /** What the models loaded in the shared pool may cost together, in bytes (0: no budget). */
  modelMemoryBytes: number;
}

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** A commander argument parser for whole numbers from `min` to `max`. */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

function metricPrefix(value: string): string {
  if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(value)) throw new InvalidArgumentError("expected letters, digits and underscores, not starting with a digit");
  return value;
}

/**
 * The server flags, each with its environment variable; also what `--help` prints. One table for
 * `Server.run()` and for the `shoal` command.
 */
function flags(defaults: ServerConfig): Option[] {
  return [
    new Option("--port <number>", "TCP port to listen on (0: any free port)").env("SHOAL_PORT").argParser(integer(0, 65535)).default(defaults.port),
    new Option("--address <host>", "address to listen on").env("SHOAL_ADDRESS").default(defaults.address),
    new Option("--timeout <ms>", "deadline of each request from its arrival, queueing included").env("SHOAL_TIMEOUT").argParser(integer(1)).default(defaults.timeoutMs),
    new Option("--capacity <items>", "most items each stage may hold queued; more get 429").env("SHOAL_CAPACITY").argParser(integer(1)).default(defaults.capacity),
    new Option("--max-request-size <bytes>", "largest request body; larger ones get 413").env("SHOAL_MAX_REQUEST_SIZE").argParser(integer(1)).default(defaults.maxRequestSize),
    new Option("--log-level <level>", "least severe log level written").env("SHOAL_LOG_LEVEL").choices(LOG_LEVELS).default(defaults.logLevel),
    new Option("--log-format <format>", "json, or pretty for readable lines").env("SHOAL_LOG_FORMAT").choices(["json", "pretty"]).default(defaults.logFormat),
    new Option("--dry-run", "start one worker per stage, send each route's example through its pipeline, load every model once, print timings and exit").env("SHOAL_DRY_RUN").default(defaults.dryRun),
    new Option("--namespace <prefix>", "prefix of every Prometheus metric name").env("SHOAL_NAMESPACE").argParser(metricPrefix).default(defaults.namespace),
    new Option("--model-repository <dir>", "serve every model of this folder with the V2 protocol").env("SHOAL_MODEL_REPOSITORY").default(defaults.modelRepository),
    new Option("--workers <n>", "workers of the shared pool that hosts the models").env("SHOAL_WORKERS").argParser(integer(1)).default(defaults.workers),
    new Option("--model-isolation <kind>", "run the shared pool's workers as threads or processes").env("SHOAL_MODEL_ISOLATION").choices(["thread", "process"]).default(defaults.modelIsolation),
    new Option("--model-memory-bytes <bytes>", "what loaded models may cost together; the least recently used idle ones are evicted (0: no budget)").env("SHOAL_MODEL_MEMORY_BYTES").argParser(integer(0)).default(defaults.modelMemoryBytes),
  ];
}

/** The built-in defaults. */
export function defaultConfig(): ServerConfig {
  return {
    port: 8000,
    address: "0.0.0.0",
    timeoutMs: 3000,
    capacity: 1024,
    maxRequestSize: 10 * 1024 * 1024,
    logLevel: "info",
    logFormat: process.stdout.isTTY ? "pretty" : "json",
    namespace: "shoal",
    dryRun: false,
    modelRepository: undefined,
    workers: 1,
    modelIsolation: "thread",
    modelMemoryBytes: 0,
  };
}

/** Adds the server flags to `command`, with `defaults` over the built-in ones. */
export function addServerFlags(command: Command, defaults: Partial<ServerConfig> = {}): Command {
  for (const option of flags({ ...defaultConfig(), ...defaults })) command.addOption(option);
  return command;
}

/** The configuration from the options of a command parsed with {@link addServerFlags}. */
export function serverConfigOf(command: Command): ServerConfig {
  const o = command.opts();
  return {
    port: o.port,
    address: o.address,
    timeoutMs: o.timeout,
    capacity: o.capacity,
    maxRequestSize: o.maxRequestSize,
    logLevel: o.logLevel,
    logFormat: o.logFormat,
    namespace: o.namespace,
    dryRun: Boolean(o.dryRun),
    modelRepository: o.modelRepository,
    workers: o.workers,
    modelIsolation: o.modelIsolation,
    modelMemoryBytes: o.modelMemoryBytes,
  };
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
  return serverConfigOf(program);
}
