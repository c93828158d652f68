/**
 * A Worker's own spans and attributes for the trace of the batch it is running (docs/observability.md).
 * The worker has no OpenTelemetry SDK: it records names, times and attributes while its batch
 * is traced, and the coordinator makes them spans under the batch's span. While tracing is off
 * (or samples none of the batch's requests) nothing is recorded and `span()` only runs its function.
 */

/** An attribute's value, as OpenTelemetry takes it. */
export type TraceValue = string | number | boolean;

/** A span a Worker recorded: its times are milliseconds since the epoch (the worker's clock is not the coordinator's). */
export interface WorkerSpan {
  name: string;
  start: number;
  end: number;
  attributes?: Record<string, TraceValue>;
  /** Set when the function it timed threw. */
  error?: string;
}

/** What a traced batch's Worker recorded: its spans, and attributes for the batch's span. */
export interface WorkerTraceReport {
  spans: WorkerSpan[];
  attributes: Record<string, TraceValue>;
}

// Milliseconds since the epoch, finer than Date.now().
const epochMs = () => performance.timeOrigin + performance.now();

/**
 * The tracing side of a Worker: `this.trace.span("tokenize", () => ...)` inside `forward()`.
 *
 * @example
 * ```ts
 * class Model extends Worker {
 *   async forward(items: Input[]) {
 *     const ids = await this.trace.span("tokenize", () => tokenize(items), { items: items.length });
 *     this.trace.attribute("model.revision", "2024-06");
 *     return this.trace.span("run", () => this.session.run(ids));
 *   }
 * }
 * ```
 */
export class WorkerTrace {
  #report: WorkerTraceReport | undefined;

  /** Whether the batch under way is traced: what a Worker may check before costly attributes. */
  get recording(): boolean {
    return this.#report !== undefined;
  }

  /** Runs `run` and, while the batch is traced, records it as a span named `name`. */
  async span<T>(name: string, run: () => T | Promise<T>, attributes?: Record<string, TraceValue>): Promise<T> {
    const report = this.#report;
    if (report === undefined) return run();
    const span: WorkerSpan = { name, start: epochMs(), end: 0, ...(attributes === undefined ? undefined : { attributes }) };
    try {
      return await run();
    } catch (err) {
      span.error = err instanceof Error ? err.message : String(err);
      throw err;
    } finally {
      span.end = epochMs();
      report.spans.push(span);
    }
  }

  /** Sets an attribute of the batch's span, while the batch is traced. */
  attribute(key: string, value: TraceValue): void {
    if (this.#report !== undefined) this.#report.attributes[key] = value;
  }

  /**
   * Starts recording for a traced batch; `finish()` gives what was recorded.
   * @internal
   */
  begin(): void {
    this.#report = { spans: [], attributes: {} };
  }

  /** @internal */
  finish(): WorkerTraceReport | undefined {
    const report = this.#report;
    this.#report = undefined;
    return report === undefined || (report.spans.length === 0 && Object.keys(report.attributes).length === 0) ? undefined : report;
  }
}
