/**
 * The server's load as a gateway asks for it in an answer's header: the ORCA
 * `endpoint-load-metrics` report (what Envoy and the Gateway API Inference Extension read to
 * route), in its TEXT or JSON form. Made only for a request that asks, from the gauges the
 * scrape reads too.
 */

/** The request header that asks for a report, and the form it wants. */
export const LOAD_REPORT_FORMAT = "endpoint-load-metrics-format";
/** The answer's header that carries it. */
export const LOAD_REPORT = "endpoint-load-metrics";

/** A queue as a load report reads it. */
export interface QueueLoad {
  readonly queued: number;
  readonly running: number;
  /** How long its next item has waited, in ms. */
  readonly behindMs: number;
}

/** The load of the whole server: its queues', stages' and models' alike, and its requests in flight. */
export function loadOf(queues: Iterable<QueueLoad>, inFlight: number): Load {
  const load: Load = { queued: 0, running: 0, inFlight, behindSeconds: 0 };
  for (const q of queues) {
    load.queued += q.queued;
    load.running += q.running;
    load.behindSeconds = Math.max(load.behindSeconds, q.behindMs / 1000);
  }
  return load;
}

/** The load of the whole server now. */
export interface Load {
  /** Items waiting in queues, every stage's and model's. */
  queued: number;
  /** Items at workers. */
  running: number;
  /** Requests accepted and not yet answered. */
  inFlight: number;
  /** The longest any queue's next item has waited, in seconds. */
  behindSeconds: number;
}

/**
 * The value of the `endpoint-load-metrics` header for the form asked (`text` or `json`, in any
 * case), or undefined for a form Shoal does not write (ORCA's binary one). Shoal's figures are
 * ORCA's `named_metrics`, which a gateway is told the names of.
 */
export function loadReport(format: string, load: Load): string | undefined {
  const named = { queued_requests: load.queued, running_requests: load.running, in_flight_requests: load.inFlight, queue_behind_seconds: round(load.behindSeconds) };
  switch (format.trim().toLowerCase()) {
    case "text":
      return `TEXT ${Object.entries(named).map(([name, value]) => `named_metrics.${name}=${value}`).join(", ")}`;
    case "json":
      return `JSON ${JSON.stringify({ named_metrics: named })}`;
    default:
      return undefined;
  }
}

// To the microsecond: a header needs no more.
function round(seconds: number): number {
  return Math.round(seconds * 1e6) / 1e6;
}
