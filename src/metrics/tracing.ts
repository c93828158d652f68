/**
 * OpenTelemetry tracing, off unless the standard `OTEL_*` environment asks for it. Then each
 * accepted request has a span from the door to its answer (continuing the client's W3C
 * `traceparent`), with a child span for its wait in each queue and for each forward it took part
 * in, and each batch a span linked to the requests it held; spans go out by OTLP over
 * http/protobuf. The SDK is imported only when tracing starts: off, the request path pays one
 * check of {@link tracer} per request and per batch. On, whether a request is traced is decided
 * once at the door (trace-sampling.ts): one that is not costs nothing after it.
 *
 * Every time given here is on the `performance.now()` clock, as the scheduler keeps its own.
 */
import type { Attributes, Context, HrTime, Link, Span, Tracer as OtelTracer } from "@opentelemetry/api";
import type { IncomingHttpHeaders } from "node:http";
import { doorSampler, randomSpanId, randomTraceId, type DoorSampler } from "./trace-sampling.js";
import type { WorkerTraceReport } from "./worker-trace.js";

/** A request's span while it is in flight. */
export interface RequestTrace {
  /** Its trace id and its span's (for the access log). */
  readonly traceId: string;
  readonly spanId: string;
  /** The same as an OpenMetrics exemplar's labels, `trace_id` and `span_id`. */
  readonly exemplar: Readonly<Record<string, string>>;
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
 * http/protobuf to `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` through a batch span processor
 * (`OTEL_BSP_*`), samples by `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) and names
 * the service `OTEL_SERVICE_NAME` (default `shoal`).
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
  // The door samples (trace-sampling.ts): the SDK records every span it is asked for, and takes
  // a new trace's id from the door, which chose it in deciding.
  const ids = new DoorIds();
  const provider = new sdk.TracerProvider({
    resource,
    sampler: new sdk.AlwaysOnSampler(),
    idGenerator: ids,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new otlp.OTLPTraceExporter(), ...batchOptions(env) })],
  });
  const propagator = new core.W3CTraceContextPropagator();
  const extract = (headers: IncomingHttpHeaders) => propagator.extract(api.ROOT_CONTEXT, headers, api.defaultTextMapGetter);
  tracer = new Tracing(provider.getTracer("shoal"), api, extract, core.hrTime, doorSampler(env.OTEL_TRACES_SAMPLER, env.OTEL_TRACES_SAMPLER_ARG), ids);
  return async () => {
    tracer = undefined;
    await provider.shutdown();
  };
}

// The batch span processor's settings from the spec's OTEL_BSP_* variables (this SDK reads none
// of them): a whole number above 0 each, else the SDK's default (queue 2,048 spans, 512 a send,
// one send at a time, every 5 s or when 512 are waiting; a span past a full queue is dropped).
function batchOptions(env: NodeJS.ProcessEnv): Record<string, number> {
  const out: Record<string, number> = {};
  const names = { maxQueueSize: "OTEL_BSP_MAX_QUEUE_SIZE", maxExportBatchSize: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", scheduledDelayMillis: "OTEL_BSP_SCHEDULE_DELAY", exportTimeoutMillis: "OTEL_BSP_EXPORT_TIMEOUT" };
  for (const [option, name] of Object.entries(names)) {
    const value = Number(env[name]);
    if (Number.isInteger(value) && value > 0) out[option] = value;
  }
  return out;
}

/** The SDK's ids: a new trace's is the one the door chose for it (or a random one). */
class DoorIds {
  next: string | undefined;

  generateTraceId(): string {
    const id = this.next ?? randomTraceId();
    this.next = undefined;
    return id;
  }

  generateSpanId(): string {
    return randomSpanId();
  }
}

type Api = typeof import("@opentelemetry/api");

/** The V2 gRPC service, as a gRPC span's `rpc.service`. */
const GRPC_SERVICE = "inference.GRPCInferenceService";

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
    readonly sampler: DoorSampler,
    readonly ids: { next: string | undefined },
  ) {}

  /**
   * The span of a request that arrived at `arrival`, a child of its client's span when it sent a
   * `traceparent` (an HTTP header, or gRPC metadata); undefined when the sampler drops it
   * (nothing more is recorded for it). `method` is the HTTP method, or for `grpc` the RPC's.
   */
  request(method: string, route: string, arrival: number, headers: IncomingHttpHeaders, requestId: string, protocol: "http" | "grpc" = "http"): RequestTrace | undefined {
    const { api } = this;
    let parent = api.ROOT_CONTEXT;
    if (headers.traceparent !== undefined) {
      const context = this.extract(headers);
      const client = api.trace.getSpanContext(context);
      if (client !== undefined && api.trace.isSpanContextValid(client)) {
        if (!this.sampler.child(client)) return undefined;
        parent = context;
      }
    }
    if (parent === api.ROOT_CONTEXT) {
      const traceId = this.sampler.root();
      if (traceId === undefined) return undefined;
      this.ids.next = traceId;
    }
    const attributes: Attributes =
      protocol === "http"
        ? { "http.request.method": method, "http.route": route, "shoal.request_id": requestId }
        : { "rpc.system": "grpc", "rpc.service": GRPC_SERVICE, "rpc.method": method, "shoal.route": route, "shoal.request_id": requestId };
    const span = this.otel.startSpan(`${method} ${route}`, { kind: api.SpanKind.SERVER, startTime: this.time(arrival), attributes }, parent);
    return new RequestSpan(span, this, protocol === "http" ? "http.response.status_code" : "shoal.status_code");
  }

  /**
   * A batch that `stage` sent at `sentAt` to `worker` came back at `at` (`error`: it failed, or
   * was lost): a span of its own, a child of its first traced request's and linked to every
   * traced request it held; and for each of those, a span of its wait in the queue and one of
   * the forward. What its Worker recorded (`own`) goes on the batch's span and under it.
   */
  batch(tasks: readonly Traced[], stage: Readonly<Record<string, string>>, worker: number | undefined, sentAt: number, at: number, error?: string, own?: WorkerTraceReport): void {
    const links: Link[] = [];
    let first: RequestSpan | undefined;
    for (const task of tasks) {
      if (!(task.traced instanceof RequestSpan)) continue;
      first ??= task.traced;
      links.push({ context: task.traced.span.spanContext() });
    }
    if (first === undefined) return;
    const { api, otel, time } = this;
    const sent = time(sentAt);
    const back = time(at);
    const names = stageSpans(stage);
    const attributes: Attributes = { ...names.attributes, "shoal.batch_size": tasks.length };
    if (worker !== undefined) attributes["shoal.worker"] = worker;
    const batch = otel.startSpan(names.batch, { startTime: sent, attributes, links }, api.trace.setSpan(api.ROOT_CONTEXT, first.span));
    if (error !== undefined) batch.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
    if (own !== undefined) this.#worker(batch, own);
    batch.end(back);
    const toBatch: Link[] = [{ context: batch.spanContext() }];
    for (const task of tasks) {
      if (!(task.traced instanceof RequestSpan)) continue;
      const parent = api.trace.setSpan(api.ROOT_CONTEXT, task.traced.span);
      otel.startSpan(names.queue, { startTime: time(task.enqueuedAt), attributes: names.attributes }, parent).end(sent);
      const forward = otel.startSpan(names.forward, { startTime: sent, attributes, links: toBatch }, parent);
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

/** A stage's (or model version's) span names and attributes. */
interface StageSpans {
  /** `{ stage: "Embed_1" }` as `{ "shoal.stage": "Embed_1" }`. */
  readonly attributes: Attributes;
  readonly batch: string;
  readonly queue: string;
  readonly forward: string;
}

// Made once per stage: its fields are the stage's own object, kept for its life.
const stageSpansOf = new WeakMap<object, StageSpans>();
function stageSpans(fields: Readonly<Record<string, string>>): StageSpans {
  let out = stageSpansOf.get(fields);
  if (out === undefined) {
    const attributes: Attributes = {};
    for (const [key, value] of Object.entries(fields)) attributes[`shoal.${key}`] = value;
    const name = Object.values(fields)[0] ?? "";
    out = { attributes, batch: `batch ${name}`, queue: `queue ${name}`, forward: `forward ${name}` };
    stageSpansOf.set(fields, out);
  }
  return out;
}

class RequestSpan implements RequestTrace {
  readonly traceId: string;
  readonly spanId: string;
  readonly exemplar: Readonly<Record<string, string>>;

  constructor(
    readonly span: Span,
    readonly tracing: Tracing,
    // The attribute its answer's status goes in (a gRPC answer's: the HTTP status of the same outcome).
    readonly statusKey: string,
  ) {
    const context = span.spanContext();
    this.traceId = context.traceId;
    this.spanId = context.spanId;
    this.exemplar = { trace_id: context.traceId, span_id: context.spanId };
  }

  end(status: number, at: number): void {
    this.span.setAttribute(this.statusKey, status);
    if (status >= 500) this.span.setStatus({ code: this.tracing.api.SpanStatusCode.ERROR });
    this.span.end(this.tracing.time(at));
  }
}
