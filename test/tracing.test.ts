/**
 * OpenTelemetry tracing, on by the OTEL_* environment: the server sends its spans by OTLP
 * http/protobuf to a receiver in this test, which decodes them and checks the tree: each
 * request's span with its queue and forward children, the batch's span linked to the eight
 * requests it held, the Worker's own span under it, the client's traceparent continued, the
 * access log's trace and span ids, and the latency histograms' exemplars in the OpenMetrics
 * exposition.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { tracingWanted } from "../src/metrics/tracing.js";
import { fixture, post, send, startServer, type ServerProcess } from "./helpers.js";
import { fp32, freePort, V2Client } from "./grpc-helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

/** One protobuf field as read off the wire: its number and its value (a number, or the bytes of a length-delimited field). */
type Field = { n: number; v: bigint | Uint8Array };

/** The fields of one protobuf message, in order (the wire format: varint, fixed64, length-delimited, fixed32). */
function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buf[at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const n = key >> 3;
    switch (key & 7) {
      case 0:
        out.push({ n, v: varint() });
        break;
      case 1:
        out.push({ n, v: new DataView(buf.buffer, buf.byteOffset + at, 8).getBigUint64(0, true) });
        at += 8;
        break;
      case 2: {
        const length = Number(varint());
        out.push({ n, v: buf.subarray(at, at + length) });
        at += length;
        break;
      }
      case 5:
        out.push({ n, v: BigInt(new DataView(buf.buffer, buf.byteOffset + at, 4).getUint32(0, true)) });
        at += 4;
        break;
      default:
        throw new Error(`wire type ${key & 7} at ${at}`);
    }
  }
  return out;
}

const bytesOf = (f: Field[], n: number) => f.filter((x) => x.n === n).map((x) => x.v as Uint8Array);
const hex = (b: Uint8Array | undefined) => (b === undefined ? "" : Buffer.from(b).toString("hex"));
const text = (b: Uint8Array | undefined) => (b === undefined ? "" : Buffer.from(b).toString("utf8"));

/** A span as OTLP's trace.proto has it, the fields this test reads. */
interface SpanRecord {
  traceId: string;
  spanId: string;
  parentId: string;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  attributes: Record<string, string | number>;
  links: { traceId: string; spanId: string }[];
}

/** The spans of an ExportTraceServiceRequest: resource_spans(1) → scope_spans(2) → spans(2). */
function spansOf(body: Uint8Array): SpanRecord[] {
  const spans: SpanRecord[] = [];
  for (const resource of bytesOf(fields(body), 1)) {
    for (const scope of bytesOf(fields(resource), 2)) {
      for (const raw of bytesOf(fields(scope), 2)) {
        const f = fields(raw);
        const attributes: Record<string, string | number> = {};
        for (const kv of bytesOf(f, 9)) {
          const pair = fields(kv);
          const value = fields(bytesOf(pair, 2)[0]!)[0]!;
          // AnyValue: string_value(1), int_value(3).
          attributes[text(bytesOf(pair, 1)[0])] = value.n === 1 ? text(value.v as Uint8Array) : Number(value.v);
        }
        spans.push({
          traceId: hex(bytesOf(f, 1)[0]),
          spanId: hex(bytesOf(f, 2)[0]),
          parentId: hex(bytesOf(f, 4)[0]),
          name: text(bytesOf(f, 5)[0]),
          kind: Number(f.find((x) => x.n === 6)?.v ?? 0),
          start: f.find((x) => x.n === 7)!.v as bigint,
          end: f.find((x) => x.n === 8)!.v as bigint,
          attributes,
          links: bytesOf(f, 13).map((l) => ({ traceId: hex(bytesOf(fields(l), 1)[0]), spanId: hex(bytesOf(fields(l), 2)[0]) })),
        });
      }
    }
  }
  return spans;
}

/** An OTLP/HTTP receiver on a free port: the spans it was sent, and each export's method, path and type. */
async function startReceiver(): Promise<{ receiver: Server; port: number; spans: SpanRecord[]; paths: string[] }> {
  const spans: SpanRecord[] = [];
  const paths: string[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      paths.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
      spans.push(...spansOf(Buffer.concat(chunks)));
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  return { receiver, port: (receiver.address() as AddressInfo).port, spans, paths };
}

describe("tracing by OpenTelemetry", () => {
  let receiver: Server;
  let server: ServerProcess;
  let spans: SpanRecord[];
  let paths: string[];
  const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
  const CLIENT_SPAN = "00f067aa0ba902b7";

  before(async () => {
    let port: number;
    ({ receiver, port, spans, paths } = await startReceiver());
    server = await startServer(fixture("observability.ts"), {
      args: ["--access-log"],
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: "shoal-under-test" },
    });
  });

  after(async () => {
    await server?.stop();
    receiver?.close();
  });

  test("eight requests in one batch: each request's span has its queue and forward, the batch's span links all eight, the client's trace goes on", async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post(`${server.url}/eight`, {}, i === 0 ? { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } : {})),
    );
    assert.deepEqual(replies.map((r) => (r.json as { batch: number }).batch), [8, 8, 8, 8, 8, 8, 8, 8]);
    // The latency histograms' exemplars, in the OpenMetrics exposition only; the Prometheus text
    // after it still names its counters *_total.
    const open = await send(`${server.url}/metrics`, { headers: { accept: "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5" } });
    assert.equal(open.status, 200);
    assert.match(open.headers.get("content-type") ?? "", /^application\/openmetrics-text; version=1\.0\.0/);
    assert.ok(open.text.endsWith("# EOF\n"));
    assert.match(open.text, /^shoal_requests_total\{[^}]*route="\/eight"[^}]*\} 8$/m);
    const exemplars = [...open.text.matchAll(/^shoal_request_(duration_seconds|queue_seconds|forward_seconds)_bucket\{[^}]*route="\/eight"[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\} ([\d.e-]+) ([\d.]+)$/gm)];
    assert.deepEqual([...new Set(exemplars.map((m) => m[1]))].sort(), ["duration_seconds", "forward_seconds", "queue_seconds"]);
    const forwardExemplar = exemplars.find((m) => m[1] === "forward_seconds")!;
    assert.ok(Number(forwardExemplar[4]) >= 0.045, `a forward of the Worker's 50 ms: ${forwardExemplar[4]}`);
    assert.ok(Math.abs(Number(forwardExemplar[5]) - Date.now() / 1000) < 60, "a timestamp of now, in seconds");
    const plain = await send(`${server.url}/metrics`);
    assert.match(plain.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    assert.doesNotMatch(plain.text, / # \{trace_id=/);
    assert.match(plain.text, /^shoal_requests_total\{[^}]*route="\/eight"[^}]*\} 8$/m);
    // Stopping the server sends the spans still held.
    assert.equal(await server.stop(), 0);
    assert.ok(paths.length > 0 && paths.every((p) => p === "POST /v1/traces application/x-protobuf"), paths.join("; "));

    const requests = spans.filter((s) => s.name === "POST /eight");
    assert.equal(requests.length, 8);
    assert.ok(requests.every((s) => s.kind === 2), "server spans");
    const continued = requests.filter((s) => s.traceId === CLIENT_TRACE);
    assert.equal(continued.length, 1);
    assert.equal(continued[0]!.parentId, CLIENT_SPAN);
    assert.ok(requests.filter((s) => s !== continued[0]).every((s) => s.parentId === ""), "the others start traces of their own");

    const batches = spans.filter((s) => s.name === "batch Eight_4");
    assert.equal(batches.length, 1);
    const batch = batches[0]!;
    assert.equal(batch.attributes["shoal.batch_size"], 8);
    assert.deepEqual(batch.links.map((l) => l.spanId).sort(), requests.map((s) => s.spanId).sort());
    // The Worker's own span, under its batch's, within its time; its attribute on the batch's span.
    assert.equal(batch.attributes["fixture.kind"], "eight");
    const own = spans.filter((s) => s.name === "think");
    assert.equal(own.length, 1);
    assert.equal(own[0]!.parentId, batch.spanId);
    assert.equal(own[0]!.attributes.items, 8);
    assert.ok(own[0]!.end - own[0]!.start >= 25_000_000n && own[0]!.start >= batch.start && own[0]!.end <= batch.end, "the Worker's span lies within its batch's");

    for (const request of requests) {
      const children = spans.filter((s) => s.parentId === request.spanId && s.traceId === request.traceId);
      const queue = children.find((s) => s.name === "queue Eight_4");
      const forward = children.find((s) => s.name === "forward Eight_4");
      assert.ok(queue !== undefined && forward !== undefined, `${request.spanId}: ${children.map((c) => c.name)}`);
      assert.ok(request.start <= queue.start && queue.end <= forward.start && forward.end <= request.end, `queue, then forward, within the request: ${[request.start, queue.start, queue.end, forward.start, forward.end, request.end].map((t) => t - request.start).join(" ")}`);
      // The forward took the Worker's 50 ms at least.
      assert.ok(forward.end - forward.start >= 45_000_000n, `${forward.end - forward.start} ns`);
      assert.deepEqual(forward.links, [{ traceId: batch.traceId, spanId: batch.spanId }]);
      assert.equal(request.attributes["http.response.status_code"], 200);
    }

    // Each exemplar is one of the requests' spans.
    const requestIds = new Set(requests.map((r) => `${r.traceId}/${r.spanId}`));
    for (const m of exemplars) assert.ok(requestIds.has(`${m[2]}/${m[3]}`), `exemplar ${m[2]}/${m[3]} is a request's span`);

    // The access log names each request's trace and span.
    const access = server.logs().filter((l) => l.msg === "access" && l.path === "/eight");
    assert.equal(access.length, 8);
    assert.deepEqual(access.map((l) => `${l.traceId}/${l.spanId}`).sort(), requests.map((s) => `${s.traceId}/${s.spanId}`).sort());
  });
});

describe("tracing gRPC requests", () => {
  const repo = new ModelRepo();
  let receiver: Server;
  let server: ServerProcess;
  let client: V2Client;
  let spans: SpanRecord[];
  const CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c";
  const CLIENT_SPAN = "b7ad6b7169203331";

  before(async () => {
    // Four requests sent together fill one batch.
    repo.module("echo", "echo.ts", { maxBatchSize: 4, maxWaitMs: 1000 });
    let port: number;
    ({ receiver, port, spans } = await startReceiver());
    const grpcPort = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(grpcPort)], { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` });
    client = new V2Client(grpcPort);
  });

  after(async () => {
    client?.close();
    await server?.stop();
    receiver?.close();
    repo.remove();
  });

  test("ModelInfer: a request span with queue and forward children, the batch's span linked to the four, traceparent from the metadata continued", async () => {
    const infer = (i: number) =>
      client.call("ModelInfer", { model_name: "echo", inputs: [{ name: "x", datatype: "FP32", shape: [1] }], raw_input_contents: [fp32([i])] }, i === 0 ? { metadata: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } } : {});
    const answers = await Promise.all([0, 1, 2, 3].map(infer));
    assert.equal(answers.length, 4);
    assert.equal(await server.stop(), 0);

    const requests = spans.filter((s) => s.name === "ModelInfer /v2/models/echo/infer");
    assert.equal(requests.length, 4, spans.map((s) => s.name).join(", "));
    for (const r of requests) {
      assert.equal(r.kind, 2, "a server span");
      assert.equal(r.attributes["rpc.system"], "grpc");
      assert.equal(r.attributes["rpc.method"], "ModelInfer");
      assert.equal(r.attributes["shoal.status_code"], 200);
    }
    const continued = requests.filter((s) => s.traceId === CLIENT_TRACE);
    assert.equal(continued.length, 1);
    assert.equal(continued[0]!.parentId, CLIENT_SPAN);

    const batches = spans.filter((s) => s.name.startsWith("batch "));
    assert.equal(batches.length, 1, batches.map((b) => b.name).join(", "));
    assert.equal(batches[0]!.attributes["shoal.batch_size"], 4);
    assert.deepEqual(batches[0]!.links.map((l) => l.spanId).sort(), requests.map((s) => s.spanId).sort());
    for (const request of requests) {
      const children = spans.filter((s) => s.parentId === request.spanId && s.traceId === request.traceId);
      const queue = children.find((s) => s.name.startsWith("queue "));
      const forward = children.find((s) => s.name.startsWith("forward "));
      assert.ok(queue !== undefined && forward !== undefined, `${request.spanId}: ${children.map((c) => c.name)}`);
      assert.ok(request.start <= queue.start && queue.end <= forward.start && forward.end <= request.end, "queue, then forward, within the request");
      assert.deepEqual(forward.links, [{ traceId: batches[0]!.traceId, spanId: batches[0]!.spanId }]);
    }
  });
});

test("tracing is off unless the environment names an OTLP endpoint or the otlp exporter", () => {
  assert.equal(tracingWanted({}), false);
  assert.equal(tracingWanted({ OTEL_SERVICE_NAME: "x" }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), true);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }), true);
  assert.equal(tracingWanted({ OTEL_TRACES_EXPORTER: "otlp" }), true);
  assert.equal(tracingWanted({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), false);
  assert.equal(tracingWanted({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), false);
});
