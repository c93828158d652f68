/**
 * Streamed answers end to end (test/fixtures/streaming.ts in a real server): framing byte for
 * byte, Accept negotiation, batches of streams, slow readers, disconnects, failures, deadlines,
 * process workers, pipelines, and a StepWorker's continuous batching.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { join } from "node:path";
import { ROOT, assertError, fixture, post, sample, send, startServer, waitFor, waitForMetric, type LogLine, type ServerProcess } from "./helpers.js";
import { OpenStream, parseSse, sseData } from "./stream-client.js";

const SSE = { accept: "text/event-stream" };
const NDJSON = { accept: "application/x-ndjson" };
const JSON_ONLY = { accept: "application/json" };

/** Log lines with this message and tag. */
function tagged(server: ServerProcess, msg: string, tag: string): LogLine[] {
  return server.logs().filter((l) => l.msg === msg && l.tag === tag);
}

/** The metrics now, read by name and labels (absent series read as 0). */
async function scrape(url: string): Promise<(name: string, labels?: Record<string, string>) => number> {
  const text = (await send(`${url}/metrics`)).text;
  return (name, labels = {}) => sample(text, name, labels) ?? 0;
}

/** Each stage name by route, from the server's listening line. */
function stagesOf(server: ServerProcess): Record<string, string[]> {
  return server.logs().find((l) => typeof l.msg === "string" && l.msg.startsWith("listening on"))!.routes as Record<string, string[]>;
}

describe("streaming", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("streaming.ts"), { args: ["--log-format", "json"], startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  describe("framing", () => {
    test("SSE: one data event per chunk, a blank line after each, and nothing else", async () => {
      const reply = await post(`${server.url}/count`, { n: 3 }, SSE);
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get("content-type"), "text/event-stream");
      assert.equal(reply.headers.get("cache-control"), "no-cache");
      assert.ok(reply.headers.get("x-request-id"));
      assert.equal(reply.text, 'data: {"i":0}\n\ndata: {"i":1}\n\ndata: {"i":2}\n\n');
      // Chunked; Bun.serve gives a stream that ended before its head went out a length instead.
      assert.ok([null, String(reply.text.length)].includes(reply.headers.get("content-length")));
    });

    test("SSE: a chunk with line breaks (LF, CRLF, CR) is one event of several data lines", async () => {
      const lines = ["one", "two\nthree", "a\r\nb\rc", "end\n", ""];
      const reply = await post(`${server.url}/poem`, { lines }, SSE);
      assert.equal(reply.status, 200);
      assert.equal(reply.text, "data: one\n\ndata: two\ndata: three\n\ndata: a\ndata: b\ndata: c\n\ndata: end\ndata: \n\ndata: \n\n");
      // A client that parses SSE gets each chunk back, line breaks as LF.
      assert.deepEqual(
        parseSse(reply.text).map((e) => e.data),
        ["one", "two\nthree", "a\nb\nc", "end\n", ""],
      );
    });

    test("NDJSON: one JSON value a line", async () => {
      const reply = await post(`${server.url}/count`, { n: 3 }, NDJSON);
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get("content-type"), "application/x-ndjson");
      assert.equal(reply.text, '{"i":0}\n{"i":1}\n{"i":2}\n');
    });

    test("a stream of no chunks is an empty 200 stream (it starts when it ends)", async () => {
      const sse = await post(`${server.url}/count`, { n: 0 }, SSE);
      assert.equal(sse.status, 200);
      assert.equal(sse.headers.get("content-type"), "text/event-stream");
      assert.equal(sse.text, "");
      const gathered = await post(`${server.url}/count`, { n: 0 }, JSON_ONLY);
      assert.equal(gathered.text, "[]");
    });
  });

  describe("Accept negotiation", () => {
    const cases: [string, string | undefined, "sse" | "ndjson" | "json"][] = [
      ["/count", undefined, "sse"],
      ["/count", "*/*", "sse"],
      ["/count", "text/event-stream", "sse"],
      ["/count", "application/x-ndjson", "ndjson"],
      ["/count", "application/json", "json"],
      ["/count", "text/html", "json"],
      ["/count", "application/json, text/event-stream", "sse"],
      ["/lines", undefined, "ndjson"],
      ["/lines", "*/*", "ndjson"],
      ["/lines", "text/event-stream", "sse"],
      ["/lines", "application/json", "json"],
    ];
    for (const [path, accept, expected] of cases) {
      test(`${path} with ${accept === undefined ? "no Accept" : `Accept: ${accept}`} answers ${expected}`, async () => {
        const reply = await post(`${server.url}${path}`, { n: 2 }, accept === undefined ? {} : { accept });
        assert.equal(reply.status, 200, reply.text);
        if (expected === "sse") {
          assert.equal(reply.headers.get("content-type"), "text/event-stream");
          assert.equal(reply.text, 'data: {"i":0}\n\ndata: {"i":1}\n\n');
        } else if (expected === "ndjson") {
          assert.equal(reply.headers.get("content-type"), "application/x-ndjson");
          assert.equal(reply.text, '{"i":0}\n{"i":1}\n');
        } else {
          assert.equal(reply.headers.get("content-type"), "application/json");
          assert.equal(reply.headers.get("content-length"), String(reply.body.byteLength));
          assert.equal(reply.text, '[{"i":0},{"i":1}]');
        }
      });
    }

    test("a gathered answer is the Worker's gather() of the chunks", async () => {
      const reply = await post(`${server.url}/poem`, { lines: ["a", "b\n", "c"] }, JSON_ONLY);
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get("content-type"), "application/json");
      assert.deepEqual(reply.json, { text: "ab\nc", chunks: 3 });
    });
  });

  test("a batch of 8 streams: one forward() call, each request gets only its own chunks, in order", async () => {
    const stage = stagesOf(server)["/batch"]![0]!;
    const before = await scrape(server.url);
    const tags = Array.from({ length: 8 }, (_, k) => `b${k}`);
    const n = 25;
    const replies = await Promise.all(tags.map((tag, k) => post(`${server.url}/batch`, { tag, n }, k % 2 === 0 ? SSE : NDJSON)));
    replies.forEach((reply, k) => {
      assert.equal(reply.status, 200, reply.text);
      const chunks = k % 2 === 0 ? sseData(reply.text) : reply.text.trimEnd().split("\n").map((line) => JSON.parse(line));
      assert.deepEqual(chunks, Array.from({ length: n }, (_, i) => ({ tag: tags[k], i, batch: 8 })));
    });
    const now = await scrape(server.url);
    assert.equal(now("shoal_stage_batch_size_count", { stage }) - before("shoal_stage_batch_size_count", { stage }), 1, "one batch");
    assert.equal(now("shoal_stage_batch_size_sum", { stage }) - before("shoal_stage_batch_size_sum", { stage }), 8, "of 8 items");
  });

  // How many chunks a Big generator had made once it stopped making them (none for a second).
  async function stalledAt(tag: string): Promise<number> {
    const made = () => tagged(server, "big chunk made", tag).length;
    return waitFor("the generator to stop making chunks", async () => {
      const n = made();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return n > 0 && made() === n ? n : undefined;
    }, 30_000);
  }

  describe("a slow reader, reading one chunk a second", () => {
    const CHUNK = 256 * 1024;
    const CHUNKS = 120;

    // Starts a stream of big chunks, reads one a second for `seconds` while 32 other requests
    // to the same route are served, and returns the stream, what it read, and those answers.
    async function slowly(path: string, tag: string, seconds: number) {
      const stream = new OpenStream(server.port, path, { tag, n: CHUNKS, size: CHUNK });
      const first = await stream.event();
      assert.ok(first?.startsWith(`data: {"tag":"${tag}","i":0,`), first?.slice(0, 100));
      const others = Promise.all(Array.from({ length: 32 }, (_, k) => post(`${server.url}${path}`, { tag: `other${k}`, n: 3, size: 10 }, k % 2 === 0 ? JSON_ONLY : NDJSON)));
      const read = [first];
      for (let s = 0; s < seconds; s++) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        read.push(await stream.event());
      }
      const answers = await others;
      answers.forEach((reply, k) => {
        assert.equal(reply.status, 200, reply.text);
        const chunks = k % 2 === 0 ? reply.json : reply.text.trimEnd().split("\n").map((line) => JSON.parse(line));
        assert.deepEqual(chunks.map((c: { tag: string; i: number }) => `${c.tag}:${c.i}`), [0, 1, 2].map((i) => `other${k}:${i}`));
      });
      return { stream, read };
    }

    test("whenFull 'pause': its generator waits for the reader, is never failed, and the stream completes; 32 other requests are served meanwhile", async () => {
      const before = await scrape(server.url);
      const { stream, read } = await slowly("/big-pause", "slow-pause", 5);
      // The generator stopped making chunks: the count of chunks made holds still for a second,
      // well short of the whole stream.
      const stalled = await stalledAt("slow-pause");
      process.stdout.write(`# paused generator: ${stalled} of ${CHUNKS} chunks of ${CHUNK} bytes made while the client had read ${read.length}\n`);
      assert.ok(stalled < CHUNKS, `the generator made all ${CHUNKS} chunks: it was not paused`);
      assert.equal(tagged(server, "big stream ended", "slow-pause").length, 0, "the generator is still open");
      // Read the rest at full speed: every chunk, in order, and no error.
      const events = parseSse(read.join("") + (await stream.rest()));
      assert.equal(events.length, CHUNKS);
      events.forEach((e, i) => {
        assert.equal(e.event, "message");
        assert.equal(JSON.parse(e.data).i, i);
      });
      const ended = await server.waitForLog((l) => l.msg === "big stream ended" && l.tag === "slow-pause");
      assert.deepEqual([ended.aborted, ended.made], [false, CHUNKS]);
      const now = await scrape(server.url);
      assert.equal(now("shoal_stream_cancellations_total", { route: "/big-pause", reason: "slow_client" }), before("shoal_stream_cancellations_total", { route: "/big-pause", reason: "slow_client" }));
    });

    test("whenFull 'fail': the stream ends with an error event (stream backlog full) and its generator is aborted; 32 other requests are served meanwhile", async () => {
      const before = await scrape(server.url);
      const { stream, read } = await slowly("/big-fail", "slow-fail", 3);
      const ended = await server.waitForLog((l) => l.msg === "big stream ended" && l.tag === "slow-fail", 20_000);
      assert.equal(ended.aborted, true);
      assert.ok((ended.made as number) < CHUNKS, `made ${ended.made}`);
      const events = parseSse(read.join("") + (await stream.rest()));
      const last = events.at(-1)!;
      assert.equal(last.event, "error");
      assert.match(JSON.parse(last.data).error, /^stream backlog full: the client read too slowly: \d+ bytes waited$/);
      const chunks = events.slice(0, -1);
      assert.ok(chunks.length >= 1 && chunks.length < CHUNKS, `${chunks.length} chunks`);
      chunks.forEach((e, i) => assert.equal(JSON.parse(e.data).i, i));
      const now = await scrape(server.url);
      const reason = { route: "/big-fail", reason: "slow_client" };
      assert.equal(now("shoal_stream_cancellations_total", reason) - before("shoal_stream_cancellations_total", reason), 1);
    });
  });

  test("whenFull 'fail': a client that reads at full speed is never failed, even for chunks larger than the buffer", async () => {
    const reply = await post(`${server.url}/big-fail`, { tag: "fast", n: 20, size: 256 * 1024 }, SSE);
    const events = parseSse(reply.text);
    assert.deepEqual(events.map((e) => `${e.event}:${JSON.parse(e.data).i}`), Array.from({ length: 20 }, (_, i) => `message:${i}`));
  });

  describe("a client that disconnects mid-stream", () => {
    for (const [path, where] of [["/count", "thread"], ["/process", "process"]] as const) {
      test(`cancels its stream (${where} worker): the Worker's signal aborts, its generator ends, and the one worker serves the next request`, async () => {
        const tag = `gone-${where}`;
        const before = await scrape(server.url);
        const stream = new OpenStream(server.port, path, { tag, n: 100_000, delay: 20 });
        for (let k = 0; k < 3; k++) assert.match((await stream.event()) ?? "", /^data: \{"i":\d+\}\n\n$/);
        const leftAt = Date.now();
        stream.destroy();
        const aborted = await server.waitForLog((l) => l.msg === "signal aborted" && l.tag === tag);
        const ended = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === tag);
        const ms = (aborted.time as number) - leftAt;
        process.stdout.write(`# ${where} worker: the signal aborted ${ms} ms after the client hung up; the generator ended ${(ended.time as number) - leftAt} ms after\n`);
        assert.ok(ms < 2000, `the abort took ${ms} ms`);
        assert.equal(ended.aborted, true);
        assert.ok((ended.sent as number) < 100_000);
        // The stage has one worker: the next request is served only if the slot was freed.
        const next = await post(`${server.url}${path}`, { tag: `${tag}-next`, n: 2 }, SSE);
        assert.equal(next.text, 'data: {"i":0}\n\ndata: {"i":1}\n\n');
        const nextEnded = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === `${tag}-next`);
        assert.equal(nextEnded.worker, ended.worker);
        const reason = { route: path, reason: "client" };
        await waitForMetric(server.url, "shoal_stream_cancellations_total", reason, (v) => v === before("shoal_stream_cancellations_total", reason) + 1);
        await waitForMetric(server.url, "shoal_streams_active", { route: path }, (v) => v === 0);
      });
    }
  });

  test("a client that leaves before the first chunk: the Worker's signal aborts and the slot is freed", async () => {
    const stream = new OpenStream(server.port, "/count", { tag: "gone-early", n: 3, firstDelay: 60_000 });
    await server.waitForLog((l) => l.msg === "stream started" && l.tag === "gone-early");
    stream.destroy();
    const ended = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === "gone-early");
    assert.deepEqual([ended.aborted, ended.sent], [true, 0]);
    assert.equal((await post(`${server.url}/count`, { n: 1 }, SSE)).text, 'data: {"i":0}\n\n');
  });

  test("a client that leaves while its stream is paused: the paused generator is ended", async () => {
    const stream = new OpenStream(server.port, "/big-pause", { tag: "gone-paused", n: 120, size: 256 * 1024 });
    await stream.event();
    const stalled = await stalledAt("gone-paused");
    stream.destroy();
    const ended = await server.waitForLog((l) => l.msg === "big stream ended" && l.tag === "gone-paused");
    assert.equal(ended.aborted, true);
    assert.ok((ended.made as number) <= stalled + 1, `made ${ended.made} after stalling at ${stalled}`);
  });

  describe("a generator that throws", () => {
    test("after its first chunk: the SSE stream ends with an error event, and the error's stack is logged", async () => {
      const reply = await post(`${server.url}/count`, { tag: "throws-late", n: 5, failAt: 2 }, SSE);
      assert.equal(reply.status, 200);
      assert.equal(reply.text, 'data: {"i":0}\n\ndata: {"i":1}\n\nevent: error\ndata: {"error":"inference internal error"}\n\n');
      const logged = await server.waitForLog((l) => l.msg === "forward failed" && typeof l.err === "string" && l.err.includes("chunk 2 broke"));
      assert.equal(logged.level, 50);
    });

    test("after its first chunk, over NDJSON: the last line is the error's JSON", async () => {
      const reply = await post(`${server.url}/count`, { n: 5, failAt: 1 }, NDJSON);
      assert.equal(reply.text, '{"i":0}\n{"error":"inference internal error"}\n');
    });

    test("a ValidationError after the first chunk carries its message in the error event", async () => {
      const reply = await post(`${server.url}/count`, { n: 5, failAt: 1, fail: "validation" }, SSE);
      assert.equal(reply.text, 'data: {"i":0}\n\nevent: error\ndata: {"error":"request validation error: chunk 1 cannot be made"}\n\n');
    });

    test("before its first chunk: a plain error answer with the error's status", async () => {
      assertError(await post(`${server.url}/count`, { n: 5, failAt: 0 }, SSE), 500, "inference internal error");
      assertError(await post(`${server.url}/count`, { n: 5, failAt: 0, fail: "validation" }, NDJSON), 422, "request validation error: chunk 0 cannot be made");
    });

    test("gathered: the request fails as a whole", async () => {
      assertError(await post(`${server.url}/count`, { n: 5, failAt: 3 }, JSON_ONLY), 500, "inference internal error");
    });
  });

  test("a process worker streams like a thread, SSE and NDJSON", async () => {
    const sse = await post(`${server.url}/process`, { n: 4 }, SSE);
    assert.equal(sse.text, 'data: {"i":0}\n\ndata: {"i":1}\n\ndata: {"i":2}\n\ndata: {"i":3}\n\n');
    const ndjson = await post(`${server.url}/process`, { n: 2 }, NDJSON);
    assert.equal(ndjson.text, '{"i":0}\n{"i":1}\n');
    const gathered = await post(`${server.url}/process`, { n: 2 }, JSON_ONLY);
    assert.deepEqual(gathered.json, [{ i: 0 }, { i: 1 }]);
    const late = await post(`${server.url}/process`, { n: 3, failAt: 1 }, SSE);
    assert.equal(late.text, 'data: {"i":0}\n\nevent: error\ndata: {"error":"inference internal error"}\n\n');
  });

  test("a process worker's stream pauses for a client that does not read, and completes once it does", async () => {
    // Long enough that the buffers on the way (the pipe, the socket, Bun's stream) cannot hold it
    // all: up to 109 chunks of 120 were made before the pause held on Bun.
    const n = 240;
    const stream = new OpenStream(server.port, "/big-process", { tag: "process-pause", n, size: 256 * 1024 });
    const first = await stream.event();
    const stalled = await stalledAt("process-pause");
    process.stdout.write(`# paused process worker: ${stalled} of ${n} chunks made while the client read 1\n`);
    assert.ok(stalled < n, "the generator was not paused");
    const events = parseSse(first! + (await stream.rest()));
    assert.deepEqual(events.map((e) => JSON.parse(e.data).i), Array.from({ length: n }, (_, i) => i));
    const ended = await server.waitForLog((l) => l.msg === "big stream ended" && l.tag === "process-pause");
    assert.deepEqual([ended.aborted, ended.made], [false, n]);
  });

  for (const [path, where] of [["/count", "thread"], ["/process", "process"]] as const) {
    test(`a ${where} worker that dies mid-stream: the stream ends with a worker-died error event, and a new worker serves the next request`, async () => {
      const reply = await post(`${server.url}${path}`, { n: 5, exitAt: 2 }, SSE);
      assert.equal(reply.text, 'data: {"i":0}\n\ndata: {"i":1}\n\nevent: error\ndata: {"error":"worker died: the worker running this request died"}\n\n');
      await waitFor("the worker to be replaced", async () => ((await post(`${server.url}${path}`, { n: 1 }, SSE)).status === 200 ? true : undefined), 30_000);
      assert.equal((await post(`${server.url}${path}`, { n: 2 }, NDJSON)).text, '{"i":0}\n{"i":1}\n');
    });
  }

  test("a pipeline whose last stage streams and whose first does not", async () => {
    const reply = await post(`${server.url}/pipeline`, { n: 2 }, SSE);
    assert.equal(reply.status, 200);
    assert.equal(reply.text, 'data: {"i":0}\n\ndata: {"i":1}\n\ndata: {"i":2}\n\n');
    assert.deepEqual((await post(`${server.url}/pipeline`, { n: 1 }, JSON_ONLY)).json, [{ i: 0 }, { i: 1 }]);
  });

  test("a streaming stage that is not the last: its chunks are gathered and passed on, whatever the client accepts", async () => {
    for (const headers of [SSE, NDJSON, JSON_ONLY, {}]) {
      const reply = await post(`${server.url}/inner`, { n: 4 }, headers);
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get("content-type"), "application/json");
      assert.deepEqual(reply.json, { chunks: 4, sum: 6, gathered: true });
    }
  });

  test("stream metrics: first chunk, chunks per stream, active streams", async () => {
    const route = { route: "/lines" };
    const before = await scrape(server.url);
    const stream = new OpenStream(server.port, "/lines", { n: 5, delay: 300 }, NDJSON);
    assert.equal(await stream.line(), '{"i":0}\n');
    await waitForMetric(server.url, "shoal_streams_active", route, (v) => v === 1);
    assert.equal(await stream.rest(), '{"i":1}\n{"i":2}\n{"i":3}\n{"i":4}\n');
    await waitForMetric(server.url, "shoal_streams_active", route, (v) => v === 0);
    const now = await scrape(server.url);
    const delta = (name: string, labels: Record<string, string> = route) => now(name, labels) - before(name, labels);
    assert.equal(delta("shoal_stream_first_chunk_seconds_count"), 1);
    assert.ok(delta("shoal_stream_first_chunk_seconds_sum") > 0);
    assert.equal(delta("shoal_stream_chunks_count"), 1);
    assert.equal(delta("shoal_stream_chunks_sum"), 5);
    assert.equal(delta("shoal_stream_chunks_bucket", { ...route, le: "4" }), 0);
    assert.equal(delta("shoal_stream_chunks_bucket", { ...route, le: "16" }), 1);
    for (const reason of ["client", "deadline", "slow_client", "error"]) assert.equal(delta("shoal_stream_cancellations_total", { ...route, reason }), 0);
    // A stream that fails after it started counts as cancelled by an error.
    await post(`${server.url}/lines`, { n: 3, failAt: 1 });
    const failed = await scrape(server.url);
    assert.equal(failed("shoal_stream_cancellations_total", { ...route, reason: "error" }) - before("shoal_stream_cancellations_total", { ...route, reason: "error" }), 1);
    assert.equal(failed("shoal_streams_active", route), 0);
  });

  describe("StepWorker", () => {
    // Reads one stream to its end, noting when it ended among the others.
    async function generation(path: string, body: unknown, finished: string[] = []): Promise<{ chunks: any[]; text: string }> {
      const reply = await post(`${server.url}${path}`, body, SSE);
      finished.push((body as { tag: string }).tag);
      assert.equal(reply.status, 200, reply.text);
      return { chunks: sseData(reply.text), text: reply.text };
    }

    test("continuous batching: a short request that arrives while a long one runs joins between steps and finishes first", async () => {
      const finished: string[] = [];
      const long = new OpenStream(server.port, "/steps", { tag: "long", len: 150 });
      for (let k = 0; k < 3; k++) await long.event();
      const short = await generation("/steps", { tag: "short", len: 3 }, finished);
      finished.push("short-read");
      const longRest = long.rest().then((text) => (finished.push("long"), text));
      assert.deepEqual(short.chunks.map((c) => c.k), [0, 1, 2]);
      assert.ok(short.chunks.every((c) => c.active === 2), JSON.stringify(short.chunks));
      const longChunks = sseData(await longRest);
      assert.deepEqual(finished, ["short", "short-read", "long"]);
      assert.equal(longChunks.at(-1).k, 149);
    });

    test("maxActive 4 bounds the sequences of a step; all 8 requests get every chunk in order", async () => {
      const results = await Promise.all(Array.from({ length: 8 }, (_, k) => generation("/steps", { tag: `m${k}`, len: 12 })));
      const actives = results.flatMap((r) => r.chunks.map((c) => c.active as number));
      assert.equal(Math.max(...actives), 4);
      results.forEach((r, k) => assert.deepEqual(r.chunks.map((c) => `${c.tag}:${c.k}`), Array.from({ length: 12 }, (_, i) => `m${k}:${i}`)));
    });

    test("continuous: false is request-level batching: a request that arrives while a batch runs waits for all of it", async () => {
      const finished: string[] = [];
      const long = new OpenStream(server.port, "/steps-request-level", { tag: "rl-long", len: 60 });
      await long.event();
      const longDone = long.rest().then((text) => (finished.push("rl-long"), text));
      const short = await generation("/steps-request-level", { tag: "rl-short", len: 3 }, finished);
      await longDone;
      assert.deepEqual(finished, ["rl-long", "rl-short"]);
      assert.ok(short.chunks.every((c) => c.active === 1));
      // Requests that arrive together are one batch, and step together to the longest's end.
      const batch = await Promise.all([2, 4, 6, 8].map((len) => generation("/steps-request-level", { tag: `rl${len}`, len })));
      assert.deepEqual(batch.map((r) => r.chunks.length), [2, 4, 6, 8]);
      assert.ok(batch.every((r) => r.chunks[0].active === 4), JSON.stringify(batch.map((r) => r.chunks[0])));
    });

    test("join() throwing fails the requests that were joining, before any chunk; the running sequence goes on", async () => {
      const running = new OpenStream(server.port, "/steps", { tag: "j-running", len: 40 });
      await running.event();
      assertError(await post(`${server.url}/steps`, { tag: "j-bad", len: 5, failJoin: true }, SSE), 500, "inference internal error");
      const chunks = sseData((await running.event()) + (await running.rest()));
      assert.equal(chunks.at(-1).k, 39);
      assert.ok(parseSse(await post(`${server.url}/steps`, { tag: "j-after", len: 2 }, SSE).then((r) => r.text)).every((e) => e.event === "message"));
    });

    test("step() throwing fails the sequences of that step with an error event, leave() runs for each, and the worker goes on", async () => {
      const a = generation("/steps", { tag: "s-a", len: 30 });
      await server.waitForLog((l) => l.msg === "joined" && (l.tags as string[]).includes("s-a"));
      const b = await generation("/steps", { tag: "s-b", len: 10, failStep: 2 });
      assert.deepEqual(parseSse(b.text).at(-1), { event: "error", data: '{"error":"inference internal error"}' });
      assert.deepEqual(b.chunks.map((c) => c.k), [0, 1]);
      const errorOfA = parseSse((await a).text).at(-1)!;
      assert.equal(errorOfA.event, "error");
      for (const tag of ["s-a", "s-b"]) await server.waitForLog((l) => l.msg === "left" && l.tag === tag);
      assert.deepEqual((await generation("/steps", { tag: "s-c", len: 2 })).chunks.map((c) => c.k), [0, 1]);
    });

    test("a client that leaves: its sequence leaves at once (leave() runs), the others go on", async () => {
      const other = generation("/steps", { tag: "c-other", len: 50 });
      const stream = new OpenStream(server.port, "/steps", { tag: "c-gone", len: 100_000 });
      await stream.event();
      await stream.event();
      const leftAt = Date.now();
      stream.destroy();
      const left = await server.waitForLog((l) => l.msg === "left" && l.tag === "c-gone");
      process.stdout.write(`# StepWorker: leave() ran ${(left.time as number) - leftAt} ms after the client hung up\n`);
      assert.ok((left.k as number) < 100_000);
      assert.equal((await other).chunks.length, 50);
    });

    test("in a process worker: sequences join one another (several batches in the worker at once), and one that is cancelled leaves", async () => {
      const gone = new OpenStream(server.port, "/steps-process", { tag: "p-gone", len: 100_000 });
      await gone.event();
      const results = await Promise.all([3, 9, 5].map((len, k) => generation("/steps-process", { tag: `p${k}`, len })));
      results.forEach((r, k) => assert.deepEqual(r.chunks.map((c) => c.k), Array.from({ length: [3, 9, 5][k]! }, (_, i) => i)));
      assert.ok(results.every((r) => r.chunks.some((c) => c.active > 1)), "the sequences stepped together");
      gone.destroy();
      await server.waitForLog((l) => l.msg === "left" && l.tag === "p-gone");
      assert.equal((await generation("/steps-process", { tag: "p-after", len: 2 })).chunks.length, 2);
    });

    test("gathered: a StepWorker's chunks as one JSON array", async () => {
      const reply = await post(`${server.url}/steps`, { tag: "g", len: 3 }, JSON_ONLY);
      assert.deepEqual(reply.json.map((c: { k: number }) => c.k), [0, 1, 2]);
    });
  });
});

describe("streaming deadlines and keep-alive (--timeout 1000 --stream-timeout 4000 --sse-keep-alive 100)", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("streaming.ts"), { args: ["--log-format", "json", "--timeout", "1000", "--stream-timeout", "4000", "--sse-keep-alive", "100"], startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  test("no first chunk within --timeout: 408 JSON, and the Worker's signal aborts", async () => {
    const reply = await post(`${server.url}/count`, { tag: "first-late", n: 1, firstDelay: 3000 }, SSE);
    assertError(reply, 408, "request timeout: no answer within 1000 ms");
    const ended = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === "first-late");
    assert.equal(ended.aborted, true);
  });

  test("a stream not ended within --stream-timeout: an error event after its chunks, and the generator is aborted", async () => {
    const before = await scrape(server.url);
    const reply = await post(`${server.url}/count`, { tag: "whole-late", n: 100_000, delay: 50 }, SSE);
    assert.equal(reply.status, 200);
    const events = parseSse(reply.text).filter((e) => e.comment === undefined);
    assert.ok(events.length > 2, reply.text.slice(0, 200));
    assert.deepEqual(events.at(-1), { event: "error", data: '{"error":"request timeout: the stream did not end within 4000 ms"}' });
    events.slice(0, -1).forEach((e, i) => assert.equal(e.data, `{"i":${i}}`));
    const ended = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === "whole-late");
    assert.equal(ended.aborted, true);
    const reason = { route: "/count", reason: "deadline" };
    await waitForMetric(server.url, "shoal_stream_cancellations_total", reason, (v) => v === before("shoal_stream_cancellations_total", reason) + 1);
  });

  test("a gathered answer has --stream-timeout, not --timeout", async () => {
    const reply = await post(`${server.url}/count`, { n: 4, delay: 500 }, JSON_ONLY);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, [{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
  });

  test("an idle SSE stream gets keep-alive comments between its events; NDJSON gets none", async () => {
    const reply = await post(`${server.url}/count`, { n: 2, delay: 600 }, SSE);
    assert.match(reply.text, /^data: \{"i":0\}\n\n(: keep-alive\n\n)+data: \{"i":1\}\n\n$/);
    const ndjson = await post(`${server.url}/count`, { n: 2, delay: 600 }, NDJSON);
    assert.equal(ndjson.text, '{"i":0}\n{"i":1}\n');
  });
});

describe("a stream under way when the server is told to stop (--timeout 1000)", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("streaming.ts"), { args: ["--log-format", "json", "--timeout", "1000"], startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  test("gets the drain's --timeout to end, then an error event; its generator is aborted and the server exits soon after", async () => {
    const stream = new OpenStream(server.port, "/count", { tag: "at-exit", n: 100_000, delay: 20 });
    await stream.event();
    server.proc.kill("SIGTERM");
    const events = parseSse(await stream.rest());
    assert.deepEqual(events.at(-1), { event: "error", data: '{"error":"service unavailable: the server is shutting down"}' });
    assert.ok(events.length > 2);
    const ended = await server.waitForLog((l) => l.msg === "stream ended" && l.tag === "at-exit");
    assert.equal(ended.aborted, true);
    // Without the stream cut short, its worker would be given the whole --stream-timeout (300 s).
    const exited = await Promise.race([server.exitCode(), new Promise((resolve) => setTimeout(() => resolve("still running"), 20_000))]);
    assert.equal(exited, 0);
  });
});

describe("examples/streaming.ts answers as docs/streaming.md shows", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(join(ROOT, "examples", "streaming.ts"), { args: ["--log-format", "json", "--sse-keep-alive", "1000"] });
  });
  after(() => server?.stop());

  test("/count: SSE, NDJSON, gathered, keep-alive, and a 422 before the stream", async () => {
    assert.equal((await post(`${server.url}/count`, { n: 3 })).text, 'data: {"i":1}\n\ndata: {"i":2}\n\ndata: {"i":3}\n\n');
    assert.equal((await post(`${server.url}/count`, { n: 3 }, NDJSON)).text, '{"i":1}\n{"i":2}\n{"i":3}\n');
    assert.equal((await post(`${server.url}/count`, { n: 3 }, JSON_ONLY)).text, '[{"i":1},{"i":2},{"i":3}]');
    assert.match((await post(`${server.url}/count`, { n: 2, everyMs: 2500 })).text, /^data: \{"i":1\}\n\n(: keep-alive\n\n)+data: \{"i":2\}\n\n$/);
    assertError(await post(`${server.url}/count`, { n: -1 }), 422, "request validation error: n: Too small: expected number to be >=0");
  });

  test("/spell: a word joins another between steps and finishes first", async () => {
    assert.deepEqual(sseData((await post(`${server.url}/spell`, { word: "shoal" })).text), [..."shoal"].map((letter) => ({ letter, of: 1 })));
    const long = new OpenStream(server.port, "/spell", { word: "streaming" }, NDJSON);
    const first = await long.line();
    const short = await post(`${server.url}/spell`, { word: "ok" }, NDJSON);
    assert.equal(short.text, '{"letter":"o","of":2}\n{"letter":"k","of":2}\n');
    const letters = (first! + (await long.rest())).trimEnd().split("\n").map((line) => JSON.parse(line));
    assert.equal(letters.map((l) => l.letter).join(""), "streaming");
    assert.ok(letters.some((l) => l.of === 2));
  });
});
