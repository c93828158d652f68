import type { WorkerLog } from "../worker.js";
import type { LogMessage } from "./messages.js";

/** A Worker's `log`: each line sent to the coordinator as a log message, which labels it with the stage and worker. */
export function logTo(send: (message: LogMessage) => void): WorkerLog {
  const line = (level: LogMessage["level"]) => (msg: string, fields?: Record<string, unknown>) =>
    send(fields === undefined ? { kind: "log", level, msg } : { kind: "log", level, msg, fields });
  return { debug: line("debug"), info: line("info"), warn: line("warn"), error: line("error") };
}
