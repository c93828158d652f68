import type { HttpRequest } from "./http-message.js";
import type { Logger } from "../logger.js";
import type { Step, Task } from "../scheduling/task.js";
import type { RequestTrace } from "../metrics/tracing.js";

/** What the access log says of one answered inference request, besides its method and path. */
export interface AccessEntry {
  requestId: string;
  status: number;
  /** From its first byte to its answer, in ms. */
  durationMs: number;
  /** Body bytes read. */
  bytesIn: number;
  /** Body bytes answered. */
  bytesOut: number;
  /** The path it is counted under: a route's, or a model version's canonical inference path. */
  route: string;
  /** The steps it was for: their first names the model version of a V2 request. */
  steps: readonly Step[];
  /** Its task, once it was accepted: where its time went, its last batch and worker. */
  task?: Task;
  /** Its span, when tracing is on and sampled it: the line carries its trace and span ids. */
  traced?: RequestTrace | undefined;
}

/**
 * The access log (`--access-log`): one `access` line at level info for each sampled answer to a
 * route or model inference request, through the server's logger.
 */
export class AccessLog {
  readonly #log: Logger;

  constructor(
    logger: Logger,
    /** The share of answers written, from 0 to 1. */
    readonly sample: number,
  ) {
    this.#log = logger;
  }

  /** Whether this answer is written: a `sample` share of them, at random. */
  sampled(): boolean {
    return this.sample >= 1 || Math.random() < this.sample;
  }

  write(req: HttpRequest, entry: AccessEntry): void {
    const { task } = entry;
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const model = entry.steps[0]?.label;
    this.#log.info(
      {
        requestId: entry.requestId,
        method: req.method,
        // Without the query, which may hold what does not belong in a log.
        path: q < 0 ? url : url.slice(0, q),
        status: entry.status,
        durationMs: round(entry.durationMs),
        bytesIn: entry.bytesIn,
        bytesOut: entry.bytesOut,
        ...(model === undefined ? { route: entry.route } : { model }),
        queueMs: task === undefined ? undefined : round(task.queueMs),
        forwardMs: task === undefined ? undefined : round(task.forwardMs),
        batchSize: task === undefined || task.batchSize === 0 ? undefined : task.batchSize,
        worker: task?.workerId,
        traceId: entry.traced?.traceId,
        spanId: entry.traced?.spanId,
      },
      "access",
    );
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
