/**
 * Mosec's own service tests (its tests/test_service.py), ported: the services of its
 * tests/services, written again as user code in test/fixtures/mosec with one import changed
 * (`shoal.mosec`), run as Mosec runs them (`python service.py --port ...`) and held to what
 * Mosec's tests assert. What is Mosec's alone is left out: its `server: mosec/...` header and
 * HTTP/2 cleartext (docs/python.md). Every service starts at once, so the file takes seconds.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { gzipSync } from "node:zlib";
import { pack, unpack } from "msgpackr";
import { ROOT, RUNTIME, fixture, post, send, startCommand, zstdFrame, type Reply } from "./helpers.js";
import { pythonSdk } from "./python-helpers.js";
import { parseSse } from "./stream-client.js";

const sdk = pythonSdk();

interface Service {
  url: string;
  proc: ChildProcess;
}

// What Mosec's tests start, by their parameters: a service of tests/services and its flags.
// Mosec's timeouts are scaled down (its service timeout case waits 3 s), the basic, compression
// and request-size cases share one square service with all their flags, and of its four OpenAPI
// services the two whose ends are both typed or both not are run (every branch of its
// assertions; the mixed pairs are python/tests/test_mosec.py's): each service costs seconds of CPU.
const SERVICES = {
  square: ["square_service", "--compression", "--debug", "--max-request-size", "64"],
  workerTimeout: ["timeout_service", "--sleep-duration", "1", "--worker-timeout", "0.5"],
  withinTimeout: ["timeout_service", "--sleep-duration", "0.2", "--worker-timeout", "1", "--runtime"],
  serviceTimeout: ["timeout_service", "--sleep-duration", "1.5", "--worker-timeout", "2", "--timeout", "1000"],
  numbin: ["mixin_numbin_service"],
  typed: ["mixin_typed_service"],
  sse: ["sse_service"],
  multiRoute: ["multi_route_service"],
  typedTyped: ["openapi_service", "TypedPreprocess/TypedInference"],
  untypedUntyped: ["openapi_service", "UntypedPreprocess/UntypedInference"],
} as const;

const MSGPACK = { "content-type": "application/msgpack" };

describe("Mosec's service tests, on Shoal", { skip: sdk.skip ?? false }, () => {
  const services = new Map<keyof typeof SERVICES, Service>();
  const url = (name: keyof typeof SERVICES, path: string) => `${services.get(name)!.url}${path}`;

  before(async () => {
    const env = { SHOAL_CLI: join(ROOT, "dist", "cli", "main.js"), SHOAL_NODE: RUNTIME === "bun" ? "bun" : process.execPath };
    const python = "python" in sdk ? sdk.python : "";
    await Promise.all(
      Object.entries(SERVICES).map(async ([name, [file, ...args]]) => {
        const { proc, port } = await startCommand(python, [fixture(`mosec/${file}.py`), ...args, "--port", "0", "--address", "127.0.0.1"], ROOT, 90_000, env);
        services.set(name as keyof typeof SERVICES, { url: `http://127.0.0.1:${port}`, proc });
      }),
    );
  });
  after(() => {
    for (const { proc } of services.values()) if (proc.exitCode === null) proc.kill("SIGTERM");
  });

  test("square service: /, /metrics, a 422 and a 400 as bare text, and x squared", async () => {
    assert.equal((await send(url("square", "/"))).status, 200);
    assert.equal((await send(url("square", "/metrics"))).status, 200);
    const missing = await post(url("square", "/inference"), { msg: 2 });
    assert.equal(missing.status, 422);
    assert.equal(missing.text, "request validation error: 'x'");
    // Mosec answers an error with its text and no content-type; Bun's server names text/plain.
    if (RUNTIME === "node") assert.equal(missing.headers.get("content-type"), null);
    assert.equal((await post(url("square", "/inference"), "bad-binary-request")).status, 400);
    await validateSquare(url("square", "/inference"), 2);
  });

  test("timeout service: a forward past the worker's timeout is 408, one within it 200, and past the service's timeout 408", async () => {
    const body = { array: [Math.floor(Math.random() * 199) - 99] };
    const [worker, within, service] = await Promise.all([post(url("workerTimeout", "/inference"), body), post(url("withinTimeout", "/inference"), body), post(url("serviceTimeout", "/inference"), body)]);
    assert.equal(worker.status, 408, worker.text);
    assert.equal(within.status, 200, within.text);
    assert.deepEqual(within.json, body);
    assert.equal(service.status, 408, service.text);
  });

  test("NumBin mixin: numpy arrays between stages, and a JSON answer", async () => {
    const reply = await post(url("numbin", "/inference"), { num: 8 });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json, "equal");
    assert.equal(reply.headers.get("content-type"), "application/json");
  });

  test("typed MessagePack mixin: a body of forward()'s type is decoded, one that is not is 422, and the worker serves on", async () => {
    const text = Buffer.from("hello mosec");
    let reply = await post(url("typed", "/inference"), pack({ media: "text", binary: text }), MSGPACK);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/msgpack");
    assert.equal(unpack(reply.body), text.byteLength);
    reply = await post(url("typed", "/inference"), pack({ media: "none" }), MSGPACK);
    assert.equal(reply.status, 422, reply.text);
    assert.match(reply.text, /^request validation error: Object missing required field `binary`/);
    reply = await post(url("typed", "/inference"), pack({ media: "text", binary: Buffer.from("again") }), MSGPACK);
    assert.equal(unpack(reply.body), 5);
  });

  test("SSE service: five events of the text; a request its first stage refuses gets one error event, as Mosec's", async () => {
    const stream = (body: unknown) => send(url("sse", "/inference"), { method: "POST", body: JSON.stringify(body), headers: { accept: "text/event-stream", "cache-control": "no-store" } });
    let reply = await stream({ text: "mosec" });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get("content-type"), "text/event-stream");
    assert.deepEqual(events(reply), Array.from({ length: 5 }, () => ({ event: "message", data: "mosec" })));
    reply = await stream({ bad: "req" });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get("content-type"), "text/event-stream");
    assert.deepEqual(events(reply), [{ event: "error", data: "SSE inference error: 422: Unprocessable Content: request validation error: text is required" }]);
  });

  test("square service under 20 concurrent clients: every answer right, batches above one in Mosec's histogram, no task left", async () => {
    await Promise.all(Array.from({ length: 20 }, () => validateSquare(url("square", "/inference"), Math.floor(Math.random() * 1001) - 500)));
    const metrics = (await send(url("square", "/metrics"))).text;
    // Mosec's own reading: the last batch_size bucket of the exposition counts more than its first.
    const buckets = [...metrics.matchAll(/batch_size_bucket.+/g)].map(([line]) => Number(line.split(" ").at(-1)));
    assert.ok(buckets.at(-1)! > buckets[0]!, metrics);
    // ... and by Mosec's names: a batch of more than one item in the stage's series.
    const mosec = [...metrics.matchAll(/^mosec_service_batch_size_bucket\{le="(\d+)",stage="SquareService_1",connection="1"\} (\d+)$/gm)].map((m) => [Number(m[1]), Number(m[2])] as const);
    assert.equal(mosec.length, 10, metrics);
    assert.ok(mosec.at(-1)![1] > mosec[0]![1], metrics);
    assert.equal(Number(/^mosec_service_remaining_task (\d+)$/m.exec(metrics)?.[1]), 0, metrics);
    assert.match(metrics, /^mosec_service_throughput_total\{code="200",endpoint="\/inference"\} \d+$/m);
  });

  test("OpenAPI document: a typed end is described by its type, an untyped one not at all", async () => {
    for (const name of ["typedTyped", "untypedUntyped"] as const) {
      const [input, output] = SERVICES[name][1].split("/");
      const reply = await send(url(name, "/openapi/metadata.json"));
      assert.equal(reply.status, 200, reply.text);
      const spec = reply.json as { paths: Record<string, any>; components: { schemas: Record<string, unknown> } };
      const operation = spec.paths["/v1/inference"].post;
      if (input === "TypedPreprocess") {
        assert.deepEqual(operation.requestBody.content, { "application/msgpack": { schema: { $ref: "#/components/schemas/Request" } } }, name);
        assert.ok("Request" in spec.components.schemas, name);
      } else {
        assert.ok(!("requestBody" in operation), name);
      }
      if (output === "TypedInference") assert.deepEqual(operation.responses["200"].content, { "application/msgpack": { schema: { type: "integer" } } }, name);
      else assert.ok(!("content" in operation.responses["200"]), name);
    }
    // Mosec's Swagger UI page of the document: its script and Swagger UI's files are there, relative to it.
    const page = await send(url("typedTyped", "/openapi/swagger"));
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
    for (const [, src] of page.text.matchAll(/(?:src|href)="([^"]+)"/g)) assert.equal((await send(new URL(src!, url("typedTyped", "/openapi/swagger")).href)).status, 200, src);
    assert.match((await send(url("typedTyped", "/openapi/swagger-init.js"))).text, /"metadata\.json"/);
  });

  test("multi-route service: one batched stage behind a raw route and a typed MessagePack one", async () => {
    const data = Buffer.from("mosec");
    let reply = await post(url("multiRoute", "/inference"), data, { "content-type": "application/octet-stream" });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/json");
    assert.deepEqual(reply.json, { length: data.byteLength });
    reply = await post(url("multiRoute", "/v1/inference"), pack({ name: "mosec-test", bin: data }), MSGPACK);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/msgpack");
    assert.deepEqual(unpack(reply.body), { length: data.byteLength });
  });

  test("compression: a plain, a gzip and a zstd body", async () => {
    const body = Buffer.from(JSON.stringify({ x: 2 }));
    for (const [encoding, sent] of [[undefined, body], ["gzip", gzipSync(body)], ["zstd", zstdFrame(body)]] as const) {
      const headers: Record<string, string> = encoding === undefined ? {} : { "accept-encoding": encoding, "content-encoding": encoding };
      const reply = await post(url("square", "/inference"), sent, headers);
      assert.equal(reply.status, 200, `${encoding}: ${reply.text}`);
      assert.deepEqual(reply.json, { x: 4 }, encoding);
    }
  });

  test("max request size: a small body passes, one over --max-request-size is 413", async () => {
    assert.equal((await post(url("square", "/inference"), { x: 2 })).status, 200);
    const large = await post(url("square", "/inference"), { x: 2, padding: "a".repeat(100) });
    assert.equal(large.status, 413, large.text);
  });
});

// Mosec's validate_square_service.
async function validateSquare(route: string, x: number): Promise<void> {
  const reply = await post(route, { x });
  assert.equal(reply.status, 200, reply.text);
  assert.equal((reply.json as { x: number }).x, x ** 2);
}

// The events of an SSE answer, as httpx-sse reads them (comments skipped).
function events(reply: Reply): { event: string; data: string }[] {
  return parseSse(reply.text)
    .filter((e) => e.comment === undefined)
    .map(({ event, data }) => ({ event, data }));
}
