/**
 * Giving memory back after a busy spell (src/app/idle-gc.ts): the decision, with made-up CPU
 * shares, and a real server that collects once after a burst of requests, not while idle, not
 * with --idle-gc 0, and without lending its collector to the user's code.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { IdleGc } from "../src/app/idle-gc.js";
import { fixture, post, sleep, startServer, type ServerProcess } from "./helpers.js";

describe("when to collect", () => {
  test("once, after a busy period is followed by an idle one", () => {
    const d = new IdleGc();
    assert.deepEqual([0.5, 0.8, 0.001, 0.001, 0.002].map((share) => d.next(share)), [false, false, true, false, false]);
  });

  test("never while the process only idles", () => {
    const d = new IdleGc();
    assert.ok([0, 0.001, 0.009, 0].every((share) => !d.next(share)));
  });

  test("not while the load has only eased: a light load between the two thresholds waits", () => {
    const d = new IdleGc();
    assert.deepEqual([0.3, 0.03, 0.02, 0.004].map((share) => d.next(share)), [false, false, false, true]);
  });

  test("each collection needs a busy spell of its own", () => {
    const d = new IdleGc();
    assert.deepEqual([0.2, 0, 0, 0.2, 0, 0].map((share) => d.next(share)), [false, true, false, false, true, false]);
  });
});

const collected = (server: ServerProcess) => server.logs().filter((l) => l.msg === "idle: garbage collected");

// Enough requests, all at once, to keep the process busy for a good part of a period.
async function burst(server: ServerProcess): Promise<void> {
  for (let round = 0; round < 4; round++) {
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => post(`${server.url}/inference`, { i, pad: "x".repeat(2000) })));
    assert.ok(replies.every((r) => r.status === 200));
  }
}

// A server of fixtures/basic.ts with `args` and debug logs, stopped once `fn` is done.
async function withServer(args: string[], fn: (server: ServerProcess) => Promise<void>): Promise<void> {
  const server = await startServer(fixture("basic.ts"), { args: [...args, "--log-level", "debug"] });
  try {
    await fn(server);
  } finally {
    await server.stop();
  }
}

test("--idle-gc 300: collects after a burst of requests, not while idle, and keeps answering", () =>
  withServer(["--idle-gc", "300"], async (server) => {
    // Start-up (loading the worker) may have been a busy spell of its own: count from here.
    await sleep(1000);
    const before = collected(server).length;
    await burst(server);
    const line = await server.waitForLog((l) => l.msg === "idle: garbage collected" && collected(server).length > before, 10_000);
    assert.equal(typeof line.ms, "number");
    assert.ok((line.rssAfter as number) > 0 && (line.rssBefore as number) > 0);
    await sleep(1000);
    const settled = collected(server).length;
    await sleep(1500);
    assert.equal(collected(server).length, settled, "no collection while idle");
    assert.equal((await post(`${server.url}/inference`, { after: true })).status, 200);
  }));

test("--idle-gc 0: never collects on its own", () =>
  withServer(["--idle-gc", "0"], async (server) => {
    await burst(server);
    await sleep(1500);
    assert.equal(collected(server).length, 0);
  }));

test("neither the server's main thread nor its workers see a global gc they did not ask for", async () => {
  const server = await startServer(fixture("globals.ts"));
  try {
    const line = await server.waitForLog((l) => l.msg === "globals");
    assert.deepEqual([line.gc, line.newContext], ["undefined", "undefined"]);
    const reply = await post(`${server.url}/inference`, {});
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(JSON.parse(reply.text), { gc: "undefined", newContext: "undefined" });
  } finally {
    await server.stop();
  }
});
