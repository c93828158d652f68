import { pino, type Logger } from "pino";
import pretty from "pino-pretty";
import type { ServerConfig } from "./config.js";

export type { Logger };

/**
 * The coordinator's logger. JSON lines by default; readable lines with `--log-format pretty`.
 * Pretty output is formatted synchronously on the main thread, which is fine for a terminal and
 * too slow for production traffic; JSON goes straight to stdout.
 */
export function createLogger(config: Pick<ServerConfig, "logLevel" | "logFormat">): Logger {
  const options = { level: config.logLevel, base: { service: "shoal" } };
  if (config.logFormat === "pretty") {
    return pino(options, pretty({ colorize: Boolean(process.stdout.isTTY), ignore: "pid,hostname,service", sync: true }));
  }
  return pino(options);
}
