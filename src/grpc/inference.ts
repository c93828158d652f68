/**
 * gRPC inference: ModelInfer and ModelStreamInfer. Each request becomes a task with the model
 * version as its one step, admitted by the serving core as a REST request is (the same budget of
 * request bytes, in-flight count, drain, queues and batches), with the sooner of the server's
 * deadline and the call's.
 */
import type { Metadata, ServerDuplexStream, ServerUnaryCall, sendUnaryData } from "@grpc/grpc-js";
import { ShoalError, type ErrorDialect } from "../errors.js";
import { tracer, type RequestTrace } from "../metrics/tracing.js";
import type { Task } from "../scheduling/task.js";
import type { Entrant } from "../serving/admission.js";
import { ByteBudget, overBudget, type Hold } from "../serving/byte-budget.js";
import type { ServingCore } from "../serving/core.js";
import { arrivalOf, takeArrived } from "./call-arrival.js";
import { Undecodable } from "./decode.js";
import { grpcError } from "./status.js";
import { HEADER_LENGTH } from "../v2/binary.js";
import type { InferResponseMessage, ParameterMessage } from "./messages.js";
import { requestBody, responseMessage, type InferRequestMessage } from "./tensors.js";
import { mlserverResponse, trailingMetadata } from "./mlserver-responses.js";
import { requestIdOf } from "../serving/request-id.js";
import { requestSchedule, tenantOf } from "../serving/request-schedule.js";
import type { TenantKey } from "../config.js";

/**
 * Where one request's outcome goes: a unary call's callback, or a stream's next message. An
 * error comes in the words of its dialect; a response of an MLServer model with the trailing
 * metadata of its headers; and after the responses of a stream answered one by one, nothing.
 */
type Deliver = (error: ShoalError | undefined, response?: InferResponseMessage, trailer?: Metadata, dialect?: ErrorDialect) => void;

/** How an MLServer model's request is answered: `raw` when it sent raw contents; `each` takes a stream's responses one by one. */
interface MLServerAnswer {
  raw: boolean;
  each?: (response: InferResponseMessage) => void;
}

/** The answer side of one gRPC inference request: the task's reply. */
class GrpcAnswer implements Entrant {
  timer: NodeJS.Timeout | undefined;
  task!: Task;
  /** Its span, when tracing is on and samples it. */
  traced: RequestTrace | undefined;
  /** The headers of the last response of an MLServer model's stream. */
  #headers: Record<string, string> | undefined;

  constructor(
    readonly core: ServingCore,
    readonly path: string,
    readonly arrival: number,
    readonly hold: Hold,
    readonly deliver: Deliver,
    /** Set for a model in MLServer's format. */
    readonly mlserver: MLServerAnswer | undefined,
  ) {}

  send(body: Uint8Array, _contentType: string, headers?: Record<string, string>): void {
    let response: InferResponseMessage;
    try {
      response = this.mlserver === undefined ? responseMessage(body, headers?.[HEADER_LENGTH]) : mlserverResponse(body, headers?.[HEADER_LENGTH], this.mlserver.raw).response;
    } catch (err) {
      this.fail(err instanceof ShoalError ? err : new ShoalError("ENCODING", "the response could not be read"));
      return;
    }
    const each = this.mlserver?.each;
    if (each === undefined) this.deliver(undefined, response, this.mlserver === undefined ? undefined : trailingMetadata(headers));
    else {
      each(response);
      this.deliver(undefined, undefined, trailingMetadata(headers));
    }
    this.#answered(200);
  }

  fail(error: ShoalError): void {
    this.deliver(error, undefined, undefined, this.mlserver === undefined ? "shoal" : "mlserver");
    this.#answered(error.status);
  }

  #answered(status: number): void {
    const at = performance.now();
    this.core.metrics.answered(this.path, status, at - this.arrival, "grpc", this.task, this.traced?.exemplar);
    this.traced?.end(status, at);
  }

  // Only an MLServer model's ModelStreamInfer takes a stream, a response per chunk (as MLServer
  // answers it); any other gRPC request gets a streaming model's chunks gathered.
  chunk(body: Uint8Array): void {
    const each = this.mlserver?.each;
    if (each === undefined) return;
    try {
      const { response, headers } = mlserverResponse(body, undefined, this.mlserver!.raw);
      this.#headers = headers;
      each(response);
    } catch (err) {
      this.task.fail(err instanceof ShoalError ? err : new ShoalError("ENCODING", "the response could not be read"));
    }
  }

  // The last response's headers go as the call's trailing metadata, as MLServer sends them.
  end(): void {
    if (this.mlserver?.each === undefined) return;
    this.deliver(undefined, undefined, trailingMetadata(this.#headers));
    this.#answered(200);
  }

  release(): void {
    clearTimeout(this.timer);
    this.hold.release();
    this.core.admission.released(this.task);
  }
}

/** A message of a stream: Triton's ModelStreamInferResponse, or a `bare` ModelInferResponse (MLServer's). */
type StreamAnswer = { error_message?: string; infer_response?: InferResponseMessage; bare?: boolean };

/**
 * Requests under way on one ModelStreamInfer stream at most: past them, the stream is read no
 * further until one is answered. A client that never reads its answers gets this much work done,
 * and then holds a stream that costs nothing.
 */
export const STREAM_PENDING = 32;

/** The inference calls of the V2 gRPC service. */
export class GrpcInference {
  // Answers written on streams and not yet taken by their clients, in all: past it, the stream
  // that would add more is reset.
  readonly #unread: ByteBudget;

  constructor(
    readonly core: ServingCore,
    /** Each request's deadline from its arrival, in ms (`--timeout`). */
    readonly timeoutMs: number,
    /**
     * A stream whose answers the client leaves unread past these bytes is read no further until
     * it takes them; past four times as many, it is reset (`--max-request-size`).
     */
    readonly unreadBytes: number,
    /** The answers' bytes left unread on all streams together, at most (`--max-inflight-bytes`). */
    unreadInAll: number,
    /** Where a request names its tenant (`--tenant-key`). */
    readonly tenantKey: TenantKey | undefined = undefined,
  ) {
    this.#unread = new ByteBudget(unreadInAll);
  }

  /** ModelInfer: one request, one answer. */
  unary(call: ServerUnaryCall<InferRequestMessage, InferResponseMessage>, callback: sendUnaryData<InferResponseMessage>): void {
    const requestId = requestIdOf(call.metadata.get("x-request-id")[0]);
    if (call.request instanceof Undecodable) {
      callback(grpcError(call.request.error, requestId));
      return;
    }
    const task = this.#enter("ModelInfer", call.request, call.metadata, call.getDeadline(), requestId, (error, response, trailer, dialect) => {
      if (error === undefined) callback(null, response, trailer);
      else callback(grpcError(error, requestId, dialect));
    });
    if (task !== undefined) call.once("cancelled", () => this.#cancelled(task));
  }

  // The client cancelled its call: what is still queued never reaches a worker, a stream stops.
  #cancelled(task: Task): void {
    if (task.settled) return;
    this.core.metrics.cancelled("grpc");
    task.drop();
  }

  /**
   * ModelStreamInfer: each request on the stream is answered on it as it finishes, an error as
   * the message's `error_message`; the stream ends once the client has ended its side and every
   * request is answered. A stream the client cancels drops what it still has queued. A stream is
   * read no further while {@link STREAM_PENDING} of its requests are under way or its client
   * leaves its answers unread (those under way still come); it is reset past a bound of unread
   * bytes of its own, or of all streams together.
   */
  stream(call: ServerDuplexStream<InferRequestMessage, StreamAnswer>): void {
    const pending = new Set<Task>();
    const budget = this.#unread;
    let ended = false;
    // Answers' bytes written and not yet taken by the connection, and what resets the stream.
    let unread = 0;
    let reset: (() => void) | undefined;
    // The trailing metadata of an MLServer model's last answer, when it has one.
    let trailers: Metadata | undefined;
    const finish = () => {
      if (ended && pending.size === 0 && !call.cancelled) call.end(trailers);
    };
    // Reads on while few requests are under way and the client takes its answers.
    const flow = () => {
      if (pending.size < STREAM_PENDING && unread <= this.unreadBytes && !call.writableNeedDrain) {
        if (call.isPaused()) call.resume();
      } else if (!call.isPaused()) call.pause();
    };
    // Of the unread bytes, those counted against the budget of all streams: a stream's first
    // unread answer goes out even when the others hold the whole budget.
    let counted = 0;
    let over = false;
    const write = (answer: StreamAnswer) => {
      if (call.cancelled || !call.writable) return;
      const bytes = answerBytes(answer);
      const mine = budget.reserve(bytes);
      if (unread > 0 && (unread + bytes > 4 * this.unreadBytes || !mine)) {
        if (mine) budget.free(bytes);
        call.emit("cancelled");
        (reset ?? (() => call.destroy()))();
        return;
      }
      const held = mine ? bytes : 0;
      unread += bytes;
      counted += held;
      call.write(answer, () => {
        if (over) return;
        unread -= bytes;
        counted -= held;
        budget.free(held);
        flow();
      });
      flow();
    };
    // Once the stream is over, what it still held goes back, whether or not its writes call back.
    const close = () => {
      if (over) return;
      over = true;
      budget.free(counted);
      counted = 0;
    };
    call.on("close", close);
    call.on("drain", flow);
    call.on("data", (request: InferRequestMessage | Undecodable) => {
      const requestId = requestIdOf(call.metadata.get("x-request-id")[0]);
      if (request instanceof Undecodable) {
        write({ error_message: request.error.publicMessage });
        return;
      }
      const arrival = arrivalOf(request);
      if (arrival !== undefined) reset = () => arrival.reset();
      let task: Task | undefined;
      const deliver: Deliver = (error, response, trailer, dialect) => {
        if (task !== undefined) pending.delete(task);
        if (trailer !== undefined) trailers = trailer;
        // MLServer ends its stream with the error's status.
        if (error !== undefined && dialect === "mlserver") {
          call.emit("error", grpcError(error, requestId, dialect));
          return;
        }
        if (error !== undefined) write({ error_message: error.publicMessage });
        else if (response !== undefined) write({ infer_response: response });
        finish();
      };
      // An MLServer model's responses go out one by one, each a ModelInferResponse of its own (MLServer's ModelStreamInfer).
      task = this.#enter("ModelStreamInfer", request, call.metadata, call.getDeadline(), requestId, deliver, (response) => write({ infer_response: response, bare: true }));
      if (task !== undefined && !task.settled) pending.add(task);
      flow();
    });
    call.on("end", () => {
      ended = true;
      finish();
    });
    call.on("cancelled", () => {
      for (const task of pending) this.#cancelled(task);
      pending.clear();
      close();
    });
    // A stream torn down under us (the connection lost) must not become an unhandled error.
    call.on("error", () => call.emit("cancelled"));
  }

  // Makes the task of one request and queues it; a request refused at once is answered through
  // `deliver` and has no task.
  #enter(rpc: string, request: InferRequestMessage, metadata: Metadata, callDeadline: Date | number, requestId: string, deliver: Deliver, each?: MLServerAnswer["each"]): Task | undefined {
    // The bytes the message came with, held since they arrived, are the request's now; it
    // arrived with its first byte, as a REST request does.
    const arrived = takeArrived(request);
    const held = arrived?.hold;
    const arrival = arrived?.at ?? performance.now();
    let path = "/v2/models/infer";
    try {
      const { admission, plane } = this.core;
      if (arrived === undefined) admission.arrived(arrival);
      const refusal = admission.refusal(arrival);
      if (refusal !== undefined) throw refusal;
      const target = plane.find(request.model_name, request.model_version);
      path = plane.inferPath(target);
      // An MLServer model's answer comes as JSON, to be typed contents unless the request was raw.
      const mlserver = plane.dialectOfTarget(target) === "mlserver" ? { raw: request.raw_input_contents.length > 0, ...(each === undefined ? {} : { each }) } : undefined;
      const { body, bytes, transfer } = requestBody(request, mlserver !== undefined);
      const hold = held ?? admission.hold();
      if (!hold.take(Math.max(0, bytes - hold.bytes))) throw overBudget();
      // The sooner of the server's deadline and the call's, from the first byte (the call's is from now).
      const elapsed = performance.now() - arrival;
      const callMs = (callDeadline instanceof Date ? callDeadline.getTime() : callDeadline) - Date.now() + elapsed;
      // V2 `parameters.priority` and `parameters.timeout` (µs), as Triton reads them.
      const { priority: asked, timeout } = request.parameters;
      const { priority, timeoutMs: ownMs } = asked === undefined && timeout === undefined ? NO_ASK : requestSchedule(parameterValue(asked), parameterValue(timeout), "us");
      const timeoutMs = Math.min(this.timeoutMs, callMs, ownMs ?? Infinity);
      const answer = new GrpcAnswer(this.core, path, arrival, hold, deliver, mlserver);
      const headers = { ...headersOf(metadata), [HEADER_LENGTH]: String(body.header.byteLength) };
      // A traceparent in the call's metadata continues the client's trace, as the REST header does.
      if (tracer !== undefined) answer.traced = tracer.request(rpc, path, arrival, headers, requestId, "grpc");
      const meta = { requestId, headers, deadline: Date.now() - elapsed + timeoutMs, route: path, v2: plane.identityOf(target) };
      const { tenantKey } = this;
      const tenant = tenantKey === undefined ? "" : tenantOf(tenantKey, (name) => metadata.get(name)[0], (name) => parameterValue(request.parameters[name]));
      return admission.enter(plane.stepsOf(target), meta, arrival, timeoutMs, body, transfer, answer, mlserver?.each !== undefined, priority, tenant);
    } catch (err) {
      held?.release();
      if (!(err instanceof ShoalError)) throw err;
      deliver(err, undefined, undefined, this.core.plane.dialectOf(request.model_name));
      this.core.metrics.answered(path, err.status, performance.now() - arrival, "grpc");
      return undefined;
    }
  }
}

// About what an answer costs until the client takes it: its outputs' bytes, or its error.
function answerBytes(answer: StreamAnswer): number {
  const response = answer.infer_response;
  if (response === undefined) return 64 + (answer.error_message?.length ?? 0);
  let bytes = 256;
  for (const raw of response.raw_output_contents) bytes += raw.byteLength;
  return bytes;
}

const NO_ASK = { priority: 0, timeoutMs: undefined };

// A parameter's value, whichever of its fields holds it.
function parameterValue(parameter: ParameterMessage | undefined): unknown {
  const choice = parameter?.parameter_choice;
  return choice === undefined ? undefined : parameter![choice];
}

// The call's metadata as the request headers a Worker may read (text values only).
function headersOf(metadata: Metadata): Record<string, string> {
  const headers: Record<string, string> = {};
  const map = metadata.getMap();
  for (const name in map) {
    const value = map[name];
    if (typeof value === "string") headers[name] = value;
  }
  return headers;
}
