/**
 * OpenTelemetry tracing, off unless the standard `OTEL_*` environment asks for it. Then each
 * accepted request has a span from the door to its answer (continuing the client's W3C
 * `traceparent`), with a child span for its wait in each queue and for each forward it took part
 * in, and each batch a span linked to the requests it held; spans go out by OTLP over
 * http/protobuf. The SDK is imported only when tracing starts: off, the request path pays one
 * check of {@link tracer} per request and per batch.
 *
 * Every time given here is on the `performance.now()` clock, as the scheduler keeps its own.
 */
import type { Attributes, Context, HrTime, Link, Span, Tracer as OtelTracer } from "@opentelemetry/api";
import type { IncomingHttpHeaders } from "node:http";
import type { WorkerTraceReport } from "./worker-trace.js";

/** A request's span while it is in flight. */
export interface RequestTrace {
  /** Its trace id and its span's (for the access log). */
  readonly traceId: string;
  readonly spanId: string;
  /** Ends it: answered with `status` (an HTTP status) at `at`. */
  end(status: number, at: number): void;
}

/** One request's part of a batch: its span, and when it began to wait in this step's queue. */
interface Traced {
  readonly traced: RequestTrace | undefined;
  readonly enqueuedAt: number;
}

/** The tracer of a server whose environment asks for traces; undefined while tracing is off. */
export let tracer: Tracing | undefined;

/** Whether the `OTEL_*` environment asks for traces: an OTLP endpoint, or `OTEL_TRACES_EXPORTER=otlp`. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.split(",").map((e) => e.trim().toLowerCase());
  if (exporters !== undefined && exporters.some((e) => e !== "")) return exporters.includes("otlp");
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts tracing when the environment asks for it: loads the SDK, exports by OTLP
 * http/protobuf to `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, samples by `OTEL_TRACES_SAMPLER`
 * (default `parentbased_always_on`) and names the service `OTEL_SERVICE_NAME` (default `shoal`).
 * Resolves with the function that sends what is left and stops, or undefined when off.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<(() => Promise<void>) | undefined> {
  if (!tracingWanted(env)) return undefined;
  const [api, core, sdk, resources, otlp] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/core"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  const resource = resources.defaultResource().merge(resources.resourceFromAttributes({ "service.name": "shoal" })).merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: samplerOf(sdk, env.OTEL_TRACES_SAMPLER, env.OTEL_TRACES_SAMPLER_ARG),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new otlp.OTLPTraceExporter() })],
  });
  const propagator = new core.W3CTraceContextPropagator();
  tracer = new Tracing(provider.getTracer("shoal"), api, (headers) => propagator.extract(api.ROOT_CONTEXT, headers, api.defaultTextMapGetter), core.hrTime);
  return async () => {
    tracer = undefined;
    await provider.shutdown();
  };
}

type Sdk = typeof import("@opentelemetry/sdk-trace");
type Sampler = import("@opentelemetry/sdk-trace").Sampler;

// The sampler the spec's OTEL_TRACES_SAMPLER names; a ratio's argument is OTEL_TRACES_SAMPLER_ARG.
function samplerOf(sdk: Sdk, name = "parentbased_always_on", arg: string | undefined): Sampler {
  const parsed = arg === undefined ? NaN : Number(arg);
  const ratio = () => new sdk.TraceIdRatioBasedSampler(Number.isFinite(parsed) && parsed >= 0 && parsed <= 1 ? parsed : 1);
  switch (name.trim().toLowerCase()) {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return ratio();
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: ratio() });
    default:
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
}

type Api = typeof import("@opentelemetry/api");

/** What the request path asks of tracing, once it is on. */
export class Tracing {
  constructor(
    readonly otel: OtelTracer,
    readonly api: Api,
    // The context of the client's trace, from its traceparent and tracestate headers.
    readonly extract: (headers: IncomingHttpHeaders) => Context,
    // A time on the performance.now() clock as a span's: every span on one offset, so that a
    // queue's end and its forward's start, the same moment, are the same time (the SDK would
    // take each span's own offset between the two clocks).
    readonly time: (performanceNow: number) => HrTime,
  ) {}

  /**
   * The span of a request that arrived at `arrival`, a child of its client's span when it sent a
   * `traceparent`; undefined when the sampler drops it (nothing more is recorded for it).
   */
  request(method: string, route: string, arrival: number, headers: IncomingHttpHeaders, requestId: string): RequestTrace | undefined {
    const parent = headers.traceparent === undefined ? this.api.ROOT_CONTEXT : this.extract(headers);
    const span = this.otel.startSpan(`${method} ${route}`, { kind: this.api.SpanKind.SERVER, startTime: this.time(arrival), attributes: { "http.request.method": method, "http.route": route, "shoal.request_id": requestId } }, parent);
    if (!span.isRecording()) return undefined;
    return new RequestSpan(span, this);
  }

  /**
   * A batch that `stage` sent at `sentAt` to `worker` came back at `at` (`error`: it failed, or
   * was lost): a span of its own, a child of its first traced request's and linked to every
   * traced request it held; and for each of those, a span of its wait in the queue and one of
   * the forward. What its Worker recorded (`own`) goes on the batch's span and under it.
   */
  batch(tasks: readonly Traced[], stage: Readonly<Record<string, string>>, worker: number | undefined, sentAt: number, at: number, error?: string, own?: WorkerTraceReport): void {
    const { api, otel, time } = this;
    const sent = time(sentAt);
    const back = time(at);
    const attributes: Attributes = { ...prefixed(stage), "shoal.batch_size": tasks.length };
    if (worker !== undefined) attributes["shoal.worker"] = worker;
    const name = Object.values(stage)[0] ?? "";
    const links: Link[] = [];
    let first: RequestSpan | undefined;
    for (const task of tasks) {
      if (!(task.traced instanceof RequestSpan)) continue;
      first ??= task.traced;
      links.push({ context: task.traced.span.spanContext() });
    }
    if (first === undefined) return;
    const batch = otel.startSpan(`batch ${name}`, { startTime: sent, attributes, links }, api.trace.setSpan(api.ROOT_CONTEXT, first.span));
    if (error !== undefined) batch.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
    if (own !== undefined) this.#worker(batch, own);
    batch.end(back);
    const toBatch: Link[] = [{ context: batch.spanContext() }];
    for (const task of tasks) {
      if (!(task.traced instanceof RequestSpan)) continue;
      const parent = api.trace.setSpan(api.ROOT_CONTEXT, task.traced.span);
      otel.startSpan(`queue ${name}`, { startTime: time(task.enqueuedAt), attributes: prefixed(stage) }, parent).end(sent);
      const forward = otel.startSpan(`forward ${name}`, { startTime: sent, attributes, links: toBatch }, parent);
      if (error !== undefined) forward.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
      forward.end(back);
    }
  }

  // What the Worker recorded of a batch: its attributes on the batch's span, its spans under it.
  #worker(batch: Span, own: WorkerTraceReport): void {
    const { api } = this;
    batch.setAttributes(own.attributes);
    const parent = api.trace.setSpan(api.ROOT_CONTEXT, batch);
    for (const span of own.spans) {
      const child = this.otel.startSpan(span.name, { startTime: epochHrTime(span.start), ...(span.attributes === undefined ? undefined : { attributes: span.attributes }) }, parent);
      if (span.error !== undefined) child.setStatus({ code: api.SpanStatusCode.ERROR, message: span.error });
      child.end(epochHrTime(span.end));
    }
  }
}

// A worker's time (ms since the epoch: its clock's origin is not the coordinator's) as a span's.
function epochHrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

// `{ stage: "Embed_1" }` as span attributes: `{ "shoal.stage": "Embed_1" }`.
function prefixed(fields: Readonly<Record<string, string>>): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(fields)) out[`shoal.${key}`] = value;
  return out;
}

class RequestSpan implements RequestTrace {
  readonly traceId: string;
  readonly spanId: string;

  constructor(
    readonly span: Span,
    readonly tracing: Tracing,
  ) {
    const context = span.spanContext();
    this.traceId = context.traceId;
    this.spanId = context.spanId;
  }

  end(status: number, at: number): void {
    this.span.setAttribute("http.response.status_code", status);
    if (status >= 500) this.span.setStatus({ code: this.tracing.api.SpanStatusCode.ERROR });
    this.span.end(this.tracing.time(at));
  }
}
