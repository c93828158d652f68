/**
 * Answers a client cannot make the server write twice, or in a form its API cannot hold: one
 * writer per answer (the HttpReply over a real node:http response, and the Fetch-API response
 * adapter Bun.serve answers through), binary outputs refused on the generate and stream routes before anything is sent,
 * a Worker's output that does not fit its API failing only its request, OpenAI bodies bounded
 * by --max-openai-size, and the HTTP thread free while the largest dialect bodies are handled.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { gzipSync } from "node:zlib";
import { ShoalError } from "../src/errors.js";
import { HttpReply, type ReplyParts } from "../src/http/http-reply.js";
import { HandlerGuard } from "../src/http/guard.js";
import { createLogger } from "../src/logger.js";
import type { Metrics } from "../src/metrics/registry.js";
import type { Admission } from "../src/serving/admission.js";
import { ByteBudget } from "../src/serving/byte-budget.js";
import type { FetchRequest, RequestWatch } from "../src/http/fetch/fetch-request.js";
import { FetchResponse } from "../src/http/fetch/fetch-response.js";
import type { Dialect } from "../src/http/dialect.js";
import { streamPolicy } from "../src/stage-options.js";
import { Task } from "../src/scheduling/task.js";
import { fixture, post, send, sleep, startServer, type Reply, type ServerProcess } from "./helpers.js";
import { ModelRepo } from "./model-helpers.js";

const utf8 = (s: string) => new TextEncoder().encode(s);

// The data of each Server-Sent Event of a body, with its event name.
function events(body: string): { event: string; data: string }[] {
  return body
    .split("\n\n")
    .filter((e) => e !== "" && !e.startsWith(":"))
    .map((e) => {
      const lines = e.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7) ?? "message";
      return { event, data: lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n") };
    });
}

describe("one writer per answer", () => {
  let server: Server;
  let url: string;
  // What the next request's handler does with its response.
  let drive: (res: ServerResponse) => void = () => {};
  // Errors node:http emitted on responses (a write after the end, say).
  const responseErrors: Error[] = [];

  before(async () => {
    server = createServer((_req, res) => {
      res.on("error", (err) => responseErrors.push(err));
      drive(res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  /** The reply of one accepted request on `res`, with the exceptions its door was told of. */
  function httpReplyOn(res: ServerResponse, dialect?: Dialect, stream = false): { httpReply: HttpReply; task: Task; unexpected: unknown[] } {
    const unexpected: unknown[] = [];
    const guard = new (class extends HandlerGuard {
      override unexpected(err: unknown, r: ServerResponse, requestId: string): void {
        unexpected.push(err);
        super.unexpected(err, r, requestId);
      }
    })(createLogger({ logLevel: "silent", logFormat: "json" }));
    const parts: ReplyParts = { accessLog: undefined, metrics: { answered: () => {} } as unknown as Metrics, admission: { draining: false, released: () => {} } as unknown as Admission, guard };
    const httpReply = new HttpReply(parts, "/t", performance.now(), res, "r1", new ByteBudget(1 << 20).hold(), 0, dialect);
    const meta = { requestId: "r1", headers: {}, deadline: Date.now() + 5000, route: "/t" };
    const task = new Task([{ admit: () => undefined }], meta, performance.now() + 5000, new Uint8Array(), undefined, httpReply);
    httpReply.task = task;
    if (stream) {
      const metrics = { started: () => {}, interval: () => {}, ended: () => {}, cancelled: () => {} };
      httpReply.stream = { transport: "sse", policy: streamPolicy("t", true)!, deadline: performance.now() + 5000, timeoutMs: 5000, keepAliveMs: 5, metrics };
    }
    return { httpReply, task, unexpected };
  }

  /** Runs `act` on the reply of one request and reads what its client got. */
  async function answer(act: (x: ReturnType<typeof httpReplyOn>) => void, dialect?: Dialect, stream = false): Promise<{ reply: Reply; unexpected: unknown[]; threw: unknown }> {
    let made: ReturnType<typeof httpReplyOn> | undefined;
    let threw: unknown;
    drive = (res) => {
      made = httpReplyOn(res, dialect, stream);
      try {
        act(made);
      } catch (err) {
        threw = err;
      }
    };
    // An answer cut off leaves the client an error instead.
    const reply = await send(`${url}/`).catch((err: Error) => ({ status: 0, text: err.message }) as Reply);
    // Timers and callbacks that come after the answer (keep-alive comments, compression) have run.
    await sleep(30);
    return { reply, unexpected: made!.unexpected, threw };
  }

  test("a stream whose one chunk does not fit its dialect is answered 500 once, and nothing throws (the generate_stream crash)", async () => {
    const dialect: Dialect = {
      chunk: () => {
        throw new Error("not JSON");
      },
    };
    const { reply, unexpected, threw } = await answer(({ task }) => task.succeed(utf8("x"), "application/json"), dialect, true);
    assert.equal(threw, undefined);
    assert.deepEqual(unexpected, []);
    assert.equal(reply.status, 500);
    assert.match(reply.json.error, /^encoding error: the Worker's answer does not fit this API: not JSON$/);
  });

  test("every call after the answer is ignored: one 200, whatever comes next", async () => {
    const { reply, threw, unexpected } = await answer(({ httpReply }) => {
      httpReply.send(utf8('{"a":1}'), "application/json");
      httpReply.fail(new ShoalError("TIMEOUT", "late"));
      httpReply.send(utf8("again"), "text/plain");
      httpReply.chunk(utf8("a chunk"));
      httpReply.end();
    });
    assert.equal(threw, undefined);
    assert.deepEqual(unexpected, []);
    assert.equal(reply.status, 200);
    assert.equal(reply.text, '{"a":1}');
  });

  test("a stream ended, then failed, chunked and ended again: its chunks and one end, no error event, no write after the end", async () => {
    const before = responseErrors.length;
    const { reply, threw } = await answer(
      ({ httpReply }) => {
        httpReply.chunk(utf8("one"));
        httpReply.chunk(utf8("two"));
        httpReply.end();
        httpReply.fail(new ShoalError("TIMEOUT", "late"));
        httpReply.chunk(utf8("three"));
        httpReply.end();
      },
      undefined,
      true,
    );
    assert.equal(threw, undefined);
    assert.equal(reply.text, "data: one\n\ndata: two\n\n");
    assert.equal(responseErrors.length, before, "the keep-alive timer wrote nothing after the end");
  });

  test("a dialect hook that throws at the end costs its request only: the front is told, nothing throws", async () => {
    const dialect: Dialect = {
      finish: () => {
        throw new Error("a bug in finish()");
      },
    };
    const { threw, unexpected } = await answer(
      ({ httpReply }) => {
        httpReply.chunk(utf8("one"));
        httpReply.end();
        httpReply.end();
      },
      dialect,
      true,
    );
    assert.equal(threw, undefined);
    assert.equal(unexpected.length, 1);
  });

  test("a response header node:http refuses (from a Worker) is a 500, not an exception", async () => {
    const { reply, threw, unexpected } = await answer(({ httpReply }) => httpReply.send(utf8("{}"), "application/json", { "x-bad": "a\nb" }));
    assert.equal(threw, undefined);
    assert.equal(unexpected.length, 1);
    assert.equal(reply.status, 500);
  });

  test("a compressed answer whose client left before it was ready is dropped quietly", async () => {
    let finished: Promise<void> | undefined;
    drive = (res) => {
      const { httpReply } = httpReplyOn(res);
      httpReply.send(new Uint8Array(64 * 1024).fill(0x61), "text/plain");
      res.destroy();
      finished = sleep(50);
    };
    await assert.rejects(send(`${url}/`, { headers: { "accept-encoding": "gzip" } }));
    await finished;
  });
});

describe("the Fetch-API response adapter writes its head once", () => {
  function fetchResponse(): FetchResponse {
    const req = Object.assign(new EventEmitter(), { gone: false, headers: {}, unread: () => {}, answered: () => {}, socket: { destroy: () => {} } }) as unknown as FetchRequest;
    return new FetchResponse(req, { delete: () => {} } as unknown as RequestWatch);
  }

  test("a second head, a header after the head, and a second end change nothing", async () => {
    const res = fetchResponse();
    res.writeHead(400, { "content-type": "application/json", "x-first": "1" });
    res.writeHead(500, { "x-second": "2" });
    res.setHeader("x-third", "3");
    res.end('{"error":"first"}');
    res.end("second");
    assert.equal(res.write("after the end"), false);
    const answer = await res.answer;
    assert.equal(answer.status, 400);
    assert.equal(answer.headers.get("x-first"), "1");
    assert.equal(answer.headers.get("x-second"), null);
    assert.equal(answer.headers.get("x-third"), null);
    assert.equal(await answer.text(), '{"error":"first"}');
  });

  test("a stream's head is its first: a head written after its first chunk changes nothing", async () => {
    const res = fetchResponse();
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("data: 1\n\n");
    res.writeHead(500, { "content-type": "application/json" });
    res.end("data: 2\n\n");
    res.end("data: 3\n\n");
    const answer = await res.answer;
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get("content-type"), "text/event-stream");
    assert.equal(await answer.text(), "data: 1\n\ndata: 2\n\n");
  });
});

describe("the generate, stream and OpenAI routes under a client's bodies", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.mlp("mlp", "", { inputs: 4, hidden: 8, layers: 1, outputs: 3 });
    repo.settings("mlp", { name: "mlp", runtime: "onnx" });
    repo.module("spell", "spell.ts");
    repo.module("misfit", "misfit.ts");
    server = await startServer(fixture("text-lm.ts"), { args: ["--model-repository", repo.dir, "--workers", "1", "--timeout", "30000"], startTimeoutMs: 60_000 });
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  // The server is the one it was, and answers.
  async function stillServing(): Promise<void> {
    const health = await send(`${url}/healthz`);
    assert.equal(health.status, 200);
    await sleep(100);
    assert.equal(server.exited, false, `the server exited\n${server.describe()}`);
  }

  const BINARY = /binary_data_output asks for binary outputs, and (a generate answer is one JSON object|its answer is a stream of JSON events): ask for JSON outputs, or use \/infer for binary data/;

  test("generate_stream asking for binary outputs of an ONNX model: a 400 before anything is sent, and the server lives", async () => {
    const reply = await post(`${url}/v2/models/mlp/generate_stream`, { input: [1, 2, 3, 4], parameters: { binary_data_output: true } });
    assert.equal(reply.status, 400, reply.text);
    assert.match(reply.json.error, BINARY);
    await stillServing();
    const good = await send(`${url}/v2/models/mlp/generate_stream`, { method: "POST", body: JSON.stringify({ input: [1, 2, 3, 4] }) });
    assert.equal(events(good.text).length, 1);
    assert.deepEqual(Object.keys(JSON.parse(events(good.text)[0]!.data)), ["model_name", "output"]);
  });

  test("generate asking for binary outputs is the client's 400, not a 500", async () => {
    const reply = await post(`${url}/v2/models/mlp/generate`, { input: [1, 2, 3, 4], parameters: { binary_data_output: true } });
    assert.equal(reply.status, 400, reply.text);
    assert.match(reply.json.error, BINARY);
    await stillServing();
  });

  test("infer_stream, and infer taking a stream, refuse binary outputs with a 400: the request's, or one output's", async () => {
    const tensor = { name: "text_input", datatype: "BYTES", shape: [1], data: ["ab"] };
    const all = await post(`${url}/v2/models/spell/infer_stream`, { inputs: [tensor], parameters: { binary_data_output: true } });
    assert.equal(all.status, 400, all.text);
    assert.match(all.json.error, BINARY);
    const one = await post(`${url}/v2/models/spell/infer_stream`, { inputs: [tensor], outputs: [{ name: "text_output", parameters: { binary_data: true } }] });
    assert.equal(one.status, 400, one.text);
    assert.match(one.json.error, /output 'text_output' asks for binary data, and its answer is a stream of JSON events/);
    const negotiated = await post(`${url}/v2/models/spell/infer`, { inputs: [tensor], parameters: { binary_data_output: true } }, { accept: "text/event-stream" });
    assert.equal(negotiated.status, 400, negotiated.text);
    // Taken as one answer, binary outputs are what the binary extension is for.
    const gathered = await post(`${url}/v2/models/spell/infer`, { inputs: [tensor], parameters: { binary_data_output: true } }, { accept: "application/json" });
    assert.equal(gathered.status, 200);
    assert.ok(gathered.headers.get("inference-header-content-length"));
    await stillServing();
  });

  test("a stream whose later chunk JSON cannot hold ends with one clean error event, and the server lives", async () => {
    const res = await send(`${url}/v2/models/misfit/generate_stream`, { method: "POST", body: JSON.stringify({ x: 1 }) });
    assert.equal(res.status, 200);
    const got = events(res.text);
    assert.deepEqual(got[0], { event: "message", data: JSON.stringify({ model_name: "misfit", text_output: "fits" }) });
    assert.equal(got.length, 2, res.text);
    assert.equal(got[1]!.event, "error");
    assert.match(JSON.parse(got[1]!.data).error, /BYTES element 0 is not valid UTF-8/);
    const gathered = await post(`${url}/v2/models/misfit/generate`, { x: 1 });
    assert.equal(gathered.status, 400, gathered.text);
    await stillServing();
  });

  test("an OpenAI stream from a Worker that answers once, not in the contract's JSON: one 500 in OpenAI's shape, and the server lives", async () => {
    for (const stream of [true, false]) {
      const reply = await post(`${url}/v1/completions`, { model: "plain-garbled", prompt: "x", stream });
      assert.equal(reply.status, 500, reply.text);
      assert.equal(reply.json.error.type, "server_error");
      assert.match(reply.json.error.message, /^encoding error: the Worker's answer does not fit this API/);
    }
    await stillServing();
  });

  test("an OpenAI stream whose second chunk does not fit: its first event, then an error event, no [DONE]", async () => {
    const res = await send(`${url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "half-garbled", messages: [{ role: "user", content: "x" }], stream: true }) });
    assert.equal(res.status, 200);
    const got = events(res.text);
    assert.equal(got.length, 2, res.text);
    assert.equal(JSON.parse(got[0]!.data).choices[0].delta.content, "fits");
    assert.equal(got[1]!.event, "error");
    assert.match(JSON.parse(got[1]!.data).error.message, /does not fit this API/);
    await stillServing();
  });

  test("/healthz stays quick while eight of the largest dialect bodies are handled", async () => {
    const MiB = 1024 * 1024;
    // Numbers are the costliest JSON to parse; 4n + 1 of them fit no [N, 4] input, so the model refuses them.
    const numbers = (bytes: number) => `[${Array.from({ length: 4 * Math.floor(bytes / 16) + 1 }, () => "0.5").join(",")}]`;
    const generate = Buffer.from(`{"input":${numbers(9.5 * MiB)}}`);
    // An OpenAI body as large as a client may send, and one as large as --max-openai-size takes in the costliest shape: an object of many keys.
    const openAIHuge = Buffer.from(`{"model":"echo","prompt":"a","extra":${numbers(9.5 * MiB)}}`);
    const keys = Array.from({ length: Math.floor((256 * 1024 - 60) / 12) }, (_, i) => `"k${i}":1`).join(",");
    const openAIAtCap = Buffer.from(`{"model":"echo","prompt":"a","extra":{${keys}}}`.slice(0, 256 * 1024));
    assert.ok(generate.byteLength < 10 * MiB && openAIAtCap.byteLength <= 256 * 1024);
    const bodies: [string, Buffer][] = [
      ...Array.from({ length: 4 }, () => ["/v2/models/mlp/generate", generate] as [string, Buffer]),
      ["/v1/completions", openAIHuge],
      ["/v1/completions", openAIHuge],
      ["/v1/completions", openAIAtCap],
      ["/v1/completions", openAIAtCap],
    ];
    // The probe's connection is open and warm before the bodies go.
    assert.equal((await send(`${url}/healthz`)).status, 200);
    let busy = true;
    // A body refused at once may find its connection closed while it is still being sent.
    const sent = (path: string, body: Buffer) => send(`${url}${path}`, { method: "POST", body, headers: { "content-type": "application/json" } }).catch((err: Error) => ({ status: 413, text: `(not read: ${err.message})` }) as Reply);
    const work = Promise.all(bodies.map(([path, body]) => sent(path, body))).finally(() => (busy = false));
    const latencies: number[] = [];
    while (busy) {
      const start = performance.now();
      assert.equal((await send(`${url}/healthz`)).status, 200);
      latencies.push(performance.now() - start);
      await sleep(10);
    }
    // Each body parsed on the HTTP thread would hold it for a hundred ms or more, one after the
    // other, so that most probes would wait that long. The median leaves room for a machine busy
    // with other work, whose pauses (and the client's own sending) delay a few probes.
    const median = [...latencies].sort((a, b) => a - b)[Math.floor(latencies.length / 2)]!;
    assert.ok(latencies.length >= 3 && median < 50, `/healthz took ${median.toFixed(0)} ms at the median (${latencies.length} probes: ${latencies.map((l) => l.toFixed(0)).join(" ")})`);
    const replies = await work;
    assert.deepEqual(
      replies.map((r) => r.status),
      [400, 400, 400, 400, 413, 413, 200, 200],
      replies.map((r) => r.text.slice(0, 200)).join("\n"),
    );
  });
});

describe("--max-openai-size 4096: what the OpenAI routes parse on the HTTP thread is bounded", () => {
  let server: ServerProcess;
  let url: string;

  before(async () => {
    server = await startServer(fixture("text-lm.ts"), { args: ["--max-openai-size", "4096"] });
    url = server.url;
  });
  after(() => server?.stop());

  test("a larger body is a 413 in OpenAI's shape, sent or inflated, before it is parsed", async () => {
    const body = JSON.stringify({ model: "echo", prompt: "a ".repeat(3000) });
    for (const [sent, headers, message] of [
      [body, {}, "request body is too large: the limit is 4096 bytes"],
      [gzipSync(body), { "content-encoding": "gzip" }, "request body is too large: the limit is 4096 bytes, once inflated"],
    ] as const) {
      const reply = await send(`${url}/v1/completions`, { method: "POST", body: sent, headers: { "content-type": "application/json", ...headers } });
      assert.equal(reply.status, 413, reply.text);
      assert.deepEqual(reply.json.error, { message, type: "invalid_request_error", param: null, code: "body_too_large" });
    }
    const small = await post(`${url}/v1/completions`, { model: "echo", prompt: "a b", max_tokens: 2 });
    assert.equal(small.json.choices[0].text, "a b");
  });

  test("a Worker's answer larger than it fails its request; a stream of small chunks as long as it likes does not", async () => {
    const prompt = "a ".repeat(1500);
    const whole = await post(`${url}/v1/completions`, { model: "echo", prompt, max_tokens: 1500 });
    assert.equal(whole.status, 500, whole.text);
    assert.match(whole.json.error.message, /^encoding error: the Worker's answer does not fit this API: its \d+ bytes are more than the 4096 this API reads$/);
    const streamed = await send(`${url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "echo", prompt, max_tokens: 1500, stream: true }) });
    const got = events(streamed.text);
    assert.equal(got.at(-1)!.data, "[DONE]");
    assert.equal(got.length, 1501);
  });
});
