/**
 * The client's retries: the pure decision (Retry-After, backoff, attempts, deadline) with a fake
 * clock; the transport honouring `Retry-After`; and 429s made genuinely by a real server whose
 * model queue holds one request (`--capacity 1`), over REST and gRPC: refused without retries,
 * all answered with them.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, HttpError, outputOf } from "shoal/client";
import { GrpcClient, GrpcError } from "shoal/client/grpc";
import { retryAfterMs, retryDelay, retryPolicy } from "../src/client/retry.js";
import { freePort } from "./grpc-helpers.js";
import type { ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

describe("the retry decision", () => {
  const now = Date.parse("2026-12-01T12:00:00Z");
  const policy = retryPolicy({ attempts: 4, baseDelayMs: 100, maxDelayMs: 5000 });

  test("off unless asked", () => {
    assert.equal(retryPolicy(undefined).attempts, 1);
    assert.equal(retryPolicy(false).attempts, 1);
    assert.equal(retryDelay(retryPolicy(undefined), { attempt: 1, status: 429, now }), undefined);
    assert.deepEqual(retryPolicy(true), { attempts: 3, statuses: [429, 503], baseDelayMs: 100, maxDelayMs: 10_000 });
  });

  test("Retry-After in seconds or as an HTTP date is waited for", () => {
    assert.equal(retryAfterMs("2", now), 2000);
    assert.equal(retryAfterMs("Tue, 01 Dec 2026 12:00:03 GMT", now), 3000);
    assert.equal(retryAfterMs("Tue, 01 Dec 2026 11:00:00 GMT", now), 0);
    assert.equal(retryAfterMs("soon", now), undefined);
    assert.equal(retryAfterMs(null, now), undefined);
    assert.equal(retryDelay(policy, { attempt: 1, status: 503, retryAfter: "2", now }), 2000);
  });

  test("without Retry-After: full jitter over a doubling backoff, capped", () => {
    assert.equal(retryDelay(policy, { attempt: 1, status: 429, now }, () => 0.5), 50);
    assert.equal(retryDelay(policy, { attempt: 3, status: 429, now }, () => 1), 400);
    assert.equal(retryDelay(retryPolicy({ attempts: 20, baseDelayMs: 100, maxDelayMs: 1000 }), { attempt: 10, status: 429, now }, () => 1), 1000);
  });

  test("no retry: another status, the attempts spent, a Retry-After past the cap, a wait past the deadline", () => {
    assert.equal(retryDelay(policy, { attempt: 1, status: 500, now }), undefined);
    assert.equal(retryDelay(policy, { attempt: 4, status: 429, now }), undefined);
    assert.equal(retryDelay(policy, { attempt: 1, status: 429, retryAfter: "60", now }), undefined);
    assert.equal(retryDelay(policy, { attempt: 1, status: 429, retryAfter: "2", now, deadline: now + 1000 }), undefined);
    assert.equal(retryDelay(policy, { attempt: 1, status: 429, retryAfter: "2", now, deadline: now + 3000 }), 2000);
  });

  test("the transport waits as Retry-After says, then sends again", async () => {
    const sent: number[] = [];
    const answers = [new Response('{"error":"busy"}', { status: 503, headers: { "retry-after": "1" } }), new Response('{"ok":true}', { headers: { "content-type": "application/json" } })];
    const client = new Client("http://server.invalid", { retry: true, fetch: async () => (sent.push(Date.now()), answers.shift()!) });
    assert.deepEqual(await client.get("/x"), { ok: true });
    assert.equal(sent.length, 2);
    assert.ok(sent[1]! - sent[0]! >= 900, `waited ${sent[1]! - sent[0]!} ms`);
    const refused = new Client("http://server.invalid", { retry: true, fetch: async () => new Response('{"error":"too many requests: come back tomorrow"}', { status: 429, headers: { "retry-after": "86400" } }) });
    await assert.rejects(refused.get("/x"), (err: unknown) => err instanceof HttpError && err.status === 429 && err.message === "too many requests: come back tomorrow" && err.headers.get("retry-after") === "86400");
  });
});

describe("retries after real 429s", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let grpcPort: number;
  const busy = { parameters: { sleepMs: 300 }, inputs: [{ name: "x", data: Float32Array.of(1) }] };

  before(async () => {
    repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
    grpcPort = await freePort();
    server = await serveRepository(repo.dir, ["--capacity", "1", "--workers", "1", "--grpc-port", String(grpcPort)]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("REST: a burst is refused 429 beyond the queue; with retries every request is answered", async () => {
    const plain = new Client(server.url);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => plain.v2.infer("scale", busy)));
    const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason as HttpError);
    assert.ok(refused.length >= 1, "a burst of 6 against a queue of 1 has requests refused");
    for (const err of refused) {
      assert.ok(err instanceof HttpError, String(err));
      assert.equal(err.status, 429);
      assert.match(err.message, /too many requests/);
    }
    const statuses: number[] = [];
    const retrying = new Client(server.url, {
      retry: { attempts: 30, baseDelayMs: 100, maxDelayMs: 1000 },
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        statuses.push(response.status);
        return response;
      },
    });
    const answered = await Promise.all(Array.from({ length: 6 }, () => retrying.v2.infer("scale", busy)));
    assert.deepEqual(answered.map((r) => [...(outputOf(r, "y").data as Float32Array)]), Array.from({ length: 6 }, () => [2]));
    assert.ok(statuses.includes(429), `some attempts were refused: ${statuses.join(" ")}`);
    assert.equal(statuses.filter((s) => s === 200).length, 6);
  });

  test("gRPC: RESOURCE_EXHAUSTED beyond the queue; with retries every call is answered", async () => {
    const plain = new GrpcClient(`127.0.0.1:${grpcPort}`);
    const retrying = new GrpcClient(`127.0.0.1:${grpcPort}`, { retry: { attempts: 30, baseDelayMs: 100, maxDelayMs: 1000 } });
    try {
      const results = await Promise.allSettled(Array.from({ length: 6 }, () => plain.infer("scale", busy)));
      const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason as GrpcError);
      assert.ok(refused.length >= 1, "a burst of 6 against a queue of 1 has calls refused");
      for (const err of refused) assert.equal(err.codeName, "RESOURCE_EXHAUSTED", String(err));
      const answered = await Promise.all(Array.from({ length: 6 }, () => retrying.infer("scale", busy)));
      assert.equal(answered.length, 6);
    } finally {
      plain.close();
      retrying.close();
    }
  });
});
