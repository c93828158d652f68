/**
 * Log levels with real servers: a client's mistakes stay below `warn`, a fault of the server's is
 * one `error` line with its stack, and a flood of one failure collapses to a handful of lines.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { assertError, fixture, post, startServer, type LogLine, type Reply, type ServerProcess } from "./helpers.js";

const REQUESTS = 1000;
const CONCURRENCY = 32;

/** Sends `count` requests made by `request`, `CONCURRENCY` at a time, and resolves with the replies in order. */
async function flood(count: number, request: (i: number) => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = new Array(count);
  let next = 0;
  const sender = async () => {
    while (next < count) {
      const i = next++;
      replies[i] = await request(i);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, sender));
  return replies;
}

/** Starts the error-table fixture, runs `fn` against it, stops it, and resolves with its whole log. */
async function withServer(fn: (server: ServerProcess) => Promise<void>): Promise<LogLine[]> {
  const server = await startServer(fixture("errors.ts"));
  try {
    await fn(server);
  } finally {
    assert.equal(await server.stop(), 0, server.describe());
  }
  return server.logs();
}

const errorLines = (lines: LogLine[]) => lines.filter((l) => (l.level as number) >= 50);

describe("log levels", () => {
  test(`${REQUESTS} malformed bodies leave no line above info`, async () => {
    const bodies = ['{"x": 1,', new Uint8Array([0x22, 0xff, 0xfe, 0x22]), "not json at all", '{"kind": "validation"}', '{"kind": "client"}'];
    const lines = await withServer(async (server) => {
      const replies = await flood(REQUESTS, (i) => post(`${server.url}/echo`, bodies[i % bodies.length]));
      for (const reply of replies) assert.ok(reply.status === 400 || reply.status === 422, `${reply.status} ${reply.text}`);
    });
    const loud = lines.filter((l) => (l.level as number) > 30);
    assert.deepEqual(loud, [], "no warn or error line");
    assert.ok(!lines.some((l) => /^\s+at /m.test(JSON.stringify(l).replaceAll("\\n", "\n"))), "no stack");
  });

  test("a plain Error thrown by forward() is one error line with its stack", async () => {
    const secret = `secret-${randomUUID()}`;
    const lines = await withServer(async (server) => {
      assertError(await post(`${server.url}/echo`, { kind: "crash", secret }, { "x-request-id": "one-fault" }), 500, "inference internal error");
    });
    const errors = errorLines(lines);
    assert.equal(errors.length, 1, JSON.stringify(errors));
    const [line] = errors as [LogLine];
    assert.equal(line.msg, "forward failed");
    assert.equal(line.requestId, "one-fault");
    assert.match(String(line.err), new RegExp(`^Error: unexpected failure ${secret}\\n\\s+at `));
  });

  test("a ServerError thrown by forward() is one error line with its stack", async () => {
    const lines = await withServer(async (server) => {
      assertError(await post(`${server.url}/echo`, { kind: "server" }), 500, "internal error: the model file is missing");
    });
    const errors = errorLines(lines);
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.match(String(errors[0]!.err), /^ServerError: the model file is missing\n\s+at /);
  });

  test(`${REQUESTS} identical failures leave a handful of lines that count them all`, async () => {
    const secret = `secret-${randomUUID()}`;
    const lines = await withServer(async (server) => {
      const replies = await flood(REQUESTS, (i) => post(`${server.url}/echo`, { kind: "crash", secret }, { "x-request-id": `same-${i}` }));
      for (const reply of replies) assertError(reply, 500, "inference internal error");
    });
    const errors = errorLines(lines);
    // One written per 10 s window, and one summary per window that had repeats (the last one
    // told when the server stops).
    assert.ok(errors.length >= 2 && errors.length <= 10, JSON.stringify(errors, null, 1));
    const firsts = errors.filter((l) => l.msg === "forward failed");
    const summaries = errors.filter((l) => l.repeats !== undefined);
    assert.equal(firsts.length + summaries.length, errors.length);
    for (const line of firsts) assert.match(String(line.err), /\n\s+at /, "the first of a window has the stack");
    for (const line of summaries) {
      assert.equal(line.msg, `forward failed … and ${line.repeats} more like it in the last 10 s`);
      assert.equal(line.err, `Error: unexpected failure ${secret}`, "a summary names the error, without its stack");
      assert.equal(line.requestId, undefined);
      assert.equal(line.stage, firsts[0]!.stage);
    }
    const counted = firsts.length + summaries.reduce((sum, l) => sum + (l.repeats as number), 0);
    assert.equal(counted, REQUESTS);
  });
});
