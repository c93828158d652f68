/**
 * The shared model pool: models with their own batch settings served side by side, placement
 * by replicas, load / unload / reload through the repository extension (a reload under load
 * drops nothing), eviction under a memory budget with a reload on demand, crashed workers whose
 * models come back, models added in code, and process workers.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { assertError, fixture, post, runToExit, send, sleep, startServer, waitFor, waitForMetric, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { CLI } from "./onnx-helpers.js";

const X = { name: "x", datatype: "FP32", shape: [2], data: [1, 2] };

/** Infers with the scale model `name` and returns the reply. */
function scale(url: string, name: string, parameters: Record<string, unknown> = {}) {
  return post(`${url}/v2/models/${name}/infer`, { parameters, inputs: [X] });
}

async function waitReady(url: string, name: string): Promise<void> {
  const end = Date.now() + 20_000;
  let status = 0;
  while (Date.now() < end && (status = (await send(`${url}/v2/models/${name}/ready`)).status) !== 200) await sleep(50);
  assert.equal(status, 200, `${name} is not ready again`);
}

describe("the shared pool", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.module("batched", "scale.ts", { maxBatchSize: 8, maxWaitMs: 100, parameters: { factor: 2 } });
    repo.module("single", "scale.ts", { maxBatchSize: 1, parameters: { factor: 3 } });
    repo.module("wide", "scale.ts", { maxBatchSize: 4, maxWaitMs: 5, replicas: 2, parameters: { factor: 1 } });
    server = await serveRepository(repo.dir, ["--workers", "3", "--log-level", "debug", "--model-control", "explicit"]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("two models with different batch settings are served concurrently, each batched its own way", async () => {
    const [batched, single] = await Promise.all([
      Promise.all(Array.from({ length: 8 }, () => scale(url, "batched"))),
      Promise.all(Array.from({ length: 8 }, () => scale(url, "single"))),
    ]);
    for (const reply of batched) assert.deepEqual(reply.json.outputs[0].data, [2, 4], reply.text);
    for (const reply of single) assert.deepEqual(reply.json.outputs[0].data, [3, 6], reply.text);
    assert.ok(batched.some((r) => r.json.outputs[1].data[0] > 1), `no batch formed: ${batched.map((r) => r.json.outputs[1].data[0])}`);
    assert.ok(single.every((r) => r.json.outputs[1].data[0] === 1));
    const stats = (name: string) => send(`${url}/v2/models/${name}/stats`).then((r) => r.json.model_stats[0].batch_stats as { batch_size: number }[]);
    assert.ok((await stats("batched")).some((b) => b.batch_size > 1));
    assert.deepEqual((await stats("single")).map((b) => b.batch_size), [1]);
    const metrics = (await send(`${url}/metrics`)).text;
    assert.match(metrics, /shoal_stage_batch_size_count\{model="batched"\} [1-7]\b/);
    assert.match(metrics, /shoal_stage_batch_size_count\{model="single"\} 8\b/);
  });

  test("a model is loaded on as many workers as its replicas, the least loaded ones", () => {
    const loaded = server.logs().filter((l) => l.msg === "model loaded");
    const workersOf = (name: string) => loaded.find((l) => l.model === name)!.workers as number[];
    assert.equal(workersOf("wide").length, 2);
    assert.equal(workersOf("batched").length, 1);
    // Three workers, four replicas: every worker holds a model.
    const used = new Set(loaded.flatMap((l) => l.workers as number[]));
    assert.deepEqual([...used].sort(), [1, 2, 3]);
  });

  test("unload drains the model's requests first; then it is 404 until loaded again", async () => {
    const slow = scale(url, "single", { sleepMs: 400 });
    // Accepted before the unload: queued for the model or on its worker.
    await waitForMetric(url, "shoal_requests_in_flight", {}, (n) => n === 1);
    const unload = await post(`${url}/v2/repository/models/single/unload`, "");
    assert.equal(unload.status, 200, unload.text);
    const answered = await slow;
    assert.equal(answered.status, 200, "the in-flight request was served before the unload");
    assertError(await scale(url, "single"), 404, "not found: model 'single'");
    assertError(await send(`${url}/v2/models/single/ready`), 404, "not found: model 'single'");
    const index = (await post(`${url}/v2/repository/index`, {})).json;
    assert.deepEqual(index.find((e: { name: string }) => e.name === "single"), { name: "single", state: "UNAVAILABLE", reason: "unloaded" });
    assertError(await post(`${url}/v2/repository/models/single/unload`, ""), 404, "not found: model 'single' is not loaded");
    const load = await post(`${url}/v2/repository/models/single/load`, "");
    assert.equal(load.status, 200, load.text);
    assert.deepEqual((await scale(url, "single")).json.outputs[0].data, [3, 6]);
  });

  test("a reload under concurrent load fails no request, and takes the new settings and batch policy", async () => {
    let stop = false;
    const results: number[] = [];
    const clients = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const reply = await scale(url, "batched");
        results.push(reply.status === 200 ? reply.json.outputs[0].data[0] : -reply.status);
      }
    });
    try {
      // Some answers from the old instance, then some from the new one, under the same load.
      await waitFor("answers before the reload", () => (results.length >= 8 ? true : undefined), 20_000);
      repo.module("batched", "scale.ts", { maxBatchSize: 2, maxWaitMs: 100, parameters: { factor: 5 } });
      const reload = await post(`${url}/v2/repository/models/batched/load`, "");
      assert.equal(reload.status, 200, reload.text);
      await waitFor("answers from the new instance", () => (results.filter((v) => v === 5).length >= 8 ? true : undefined), 20_000);
    } finally {
      stop = true;
      await Promise.all(clients);
    }
    assert.ok(results.length > 10, `only ${results.length} requests`);
    assert.deepEqual(results.filter((v) => v !== 2 && v !== 5), [], "every request succeeded");
    assert.equal(results.at(-1), 5, "the new instance serves after the reload");
    assert.ok(server.logs().some((l) => l.msg === "model reloaded" && l.model === "batched"));
    // The new batch settings apply too.
    const after = await Promise.all(Array.from({ length: 6 }, () => scale(url, "batched")));
    const sizes = after.map((r) => r.json.outputs[1].data[0] as number);
    assert.ok(sizes.every((n) => n <= 2) && sizes.includes(2), `batches of ${sizes}`);
  });

  test("readiness is false while a model loads, for the server and for the model", async () => {
    repo.module("slow", "scale.ts", { parameters: { initMs: 1500 } });
    const load = post(`${url}/v2/repository/models/slow/load`, "");
    await waitFor("the load to start", async () => ((await send(`${url}/v2/health/ready`)).status === 200 ? undefined : true));
    assertError(await send(`${url}/v2/health/ready`), 503, "service unavailable: loading slow");
    assertError(await send(`${url}/v2/models/slow/ready`), 503, /service unavailable: model slow is not ready: loading/);
    assert.equal((await send(`${url}/readyz`)).status, 503);
    // A request that arrives meanwhile waits in the model's queue.
    const early = scale(url, "slow");
    assert.equal((await load).status, 200);
    assert.equal((await early).status, 200);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200);
    assert.equal((await send(`${url}/v2/models/slow/ready`)).status, 200);
  });

  test("a crashed worker is replaced and its models come back", async () => {
    const crashed = await scale(url, "wide", { crash: true });
    assertError(crashed, 500, "worker died: the worker running this request died");
    await waitFor("the replacement", () => (server.logs().some((l) => l.msg === "worker died; replacing it") ? true : undefined));
    await waitReady(url, "wide");
    // Two replicas at start, and one again on the replacement.
    await waitFor("wide on two workers again", () => {
      const loads = server.logs().filter((l) => l.msg === "model replica loaded" && l.model === "wide");
      return loads.length >= 3 ? true : undefined;
    });
    for (const name of ["wide", "batched", "single"]) assert.equal((await scale(url, name)).status, 200, name);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200);
  });
});

describe("a memory budget", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    // Each costs 1000 bytes; the budget holds one.
    repo.module("a", "scale.ts", { memoryBytes: 1000, parameters: { factor: 2 } });
    repo.module("b", "scale.ts", { memoryBytes: 1000, parameters: { factor: 3 } });
    server = await serveRepository(repo.dir, ["--workers", "2", "--model-memory-bytes", "1500"]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("evicts the least recently used idle model and loads it again on its next request", async () => {
    const state = async () => Object.fromEntries((await post(`${url}/v2/repository/index`, {})).json.map((e: { name: string; state: string }) => [e.name, e.state]));
    // Only one fits at start; the other waits for its first request.
    const first = await state();
    assert.deepEqual(Object.values(first).sort(), ["READY", "UNAVAILABLE"], JSON.stringify(first));
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200, "an evicted model does not hold readiness back");
    for (const [name, y] of [["a", 2], ["b", 3], ["a", 2], ["b", 3]] as const) {
      const reply = await scale(url, name);
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.outputs[0].data[0], y);
      assert.deepEqual(await state(), { a: name === "a" ? "READY" : "UNAVAILABLE", b: name === "b" ? "READY" : "UNAVAILABLE" });
    }
    // The log line may reach us a moment after the answer.
    await waitFor("three evictions in the log", () => (server.logs().filter((l) => l.msg === "model evicted").length >= 3 ? true : undefined));
    const index = (await post(`${url}/v2/repository/index`, {})).json.find((e: { state: string }) => e.state === "UNAVAILABLE");
    assert.match(index.reason, /evicted/);
  });
});

describe("failures", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.module("bad", "scale.ts", { parameters: { initFail: true } });
    repo.module("good", "scale.ts", { parameters: { factor: 2 } });
    server = await serveRepository(repo.dir, ["--workers", "1", "--timeout", "600", "--capacity", "2", "--model-control", "explicit"]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("a model that fails to load fails alone: 503 with the reason, the others serve, the server is ready", async () => {
    assertError(await scale(url, "bad"), 503, "service unavailable: model bad failed to load: this model cannot load (initFail)");
    assertError(await send(`${url}/v2/models/bad/ready`), 503, /not ready/);
    assert.equal((await scale(url, "good")).status, 200);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200);
    const index = (await post(`${url}/v2/repository/index`, {})).json;
    assert.deepEqual(index.find((e: { name: string }) => e.name === "bad"), { name: "bad", state: "UNAVAILABLE", reason: "this model cannot load (initFail)" });
    assertError(await post(`${url}/v2/repository/models/bad/load`, ""), 500, "internal error: this model cannot load (initFail)");
  });

  test("a full model queue is 429; a request past its deadline is 408", async () => {
    const replies = await Promise.all(Array.from({ length: 5 }, () => scale(url, "good", { sleepMs: 200 })));
    const statuses = replies.map((r) => r.status);
    assert.ok(statuses.includes(429), `no 429 in ${statuses}`);
    for (const reply of replies.filter((r) => r.status === 429)) assertError(reply, 429, "too many requests: the queue of model good is full");
    assertError(await scale(url, "good", { sleepMs: 1000 }), 408, /^request timeout/);
    await waitReady(url, "good");
    // The worker finishes the late request before it takes the next one, which may itself run out
    // of its 600 ms on a busy machine: the model serves again within a few tries.
    let status = 0;
    for (let i = 0; i < 10 && status !== 200; i++) status = (await scale(url, "good")).status;
    assert.equal(status, 200);
  });
});

describe("a worker that dies while it loads a model", () => {
  const repo = new ModelRepo();
  const marker = join(repo.dir, "crashed-once");
  let server: ServerProcess;

  before(async () => {
    // The first load ends its worker; the replacement's load finds the marker and succeeds.
    repo.module("flaky", "scale.ts", { parameters: { factor: 3, initCrashOnce: marker } });
    server = await serveRepository(repo.dir, ["--workers", "1"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("is not the model's failure: it loads again on the replacement and serves", async () => {
    assert.ok(existsSync(marker), "the first load did not crash its worker");
    assert.equal((await send(`${server.url}/v2/models/flaky/ready`)).status, 200);
    const reply = await scale(server.url, "flaky");
    assert.equal(reply.status, 200, reply.text);
    assert.ok(server.logs().some((l) => l.msg === "a worker died while loading a model; loading it again" && l.model === "flaky"), server.describe());
  });
});

describe("--dry-run with a model repository", () => {
  const repo = new ModelRepo();
  after(() => repo.remove());

  test("loads every model once, prints each one's state, and exits 1 when one cannot load", async () => {
    repo.module("good", "scale.ts");
    const ok = await runToExit(CLI, ["serve", "--model-repository", repo.dir, "--dry-run", "--log-level", "silent"]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, "model good: loaded\n");
    repo.module("bad", "scale.ts", { parameters: { initFail: true } });
    const failed = await runToExit(CLI, ["serve", "--model-repository", repo.dir, "--dry-run", "--log-level", "silent"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stdout, /^model bad: UNAVAILABLE, this model cannot load \(initFail\)$/m);
    assert.match(failed.stdout, /^model good: loaded$/m);
  });
});

describe("models added in code", () => {
  let server: ServerProcess;

  before(async () => {
    server = await startServer(fixture("models-server.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("Server.addModel() serves a model with the V2 protocol beside a stage", async () => {
    const metadata = await send(`${server.url}/v2/models/upper`);
    assert.equal(metadata.status, 200, metadata.text);
    assert.deepEqual(metadata.json.outputs.map((o: { name: string }) => o.name), ["upper", "length"]);
    const reply = await post(`${server.url}/v2/models/upper/infer`, { inputs: [{ name: "text", datatype: "BYTES", shape: [1], data: ["abc"] }] });
    assert.deepEqual(reply.json.outputs[0].data, ["ABC"]);
    assert.equal((await post(`${server.url}/inference`, { x: 2 })).json.y, 4);
  });
});

describe("process workers", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;

  before(async () => {
    repo.module("upper", "upper.ts", { parameters: { prefix: "<" } });
    repo.module("batched", "scale.ts", { maxBatchSize: 4, maxWaitMs: 20, parameters: { factor: 2 } });
    server = await serveRepository(repo.dir, ["--workers", "2", "--model-isolation", "process"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("host the models over the wire protocol, BYTES and batches included", async () => {
    const upper = await post(`${server.url}/v2/models/upper/infer`, { inputs: [{ name: "text", datatype: "BYTES", shape: [2], data: ["a", "b"] }] });
    assert.equal(upper.status, 200, upper.text);
    assert.deepEqual(upper.json.outputs[0].data, ["<A", "<B"]);
    const replies = await Promise.all(Array.from({ length: 6 }, () => scale(server.url, "batched")));
    for (const reply of replies) assert.deepEqual(reply.json.outputs[0].data, [2, 4], reply.text);
  });
});
