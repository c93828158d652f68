/**
 * Every control request is answered: concurrent loads of one model join, load and unload of a
 * model wait for each other, a load sent during start-up neither answers early nor keeps the
 * server from becoming ready, and a load slower than `--control-timeout` is answered 503 while
 * it goes on. Each request here gives up (and fails the test) if no answer comes in time.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ServerProcess, send, sleep, waitFor, type Reply } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { CLI } from "./onnx-helpers.js";

const CONTROL = ["--model-control", "explicit"];
const X = { name: "x", datatype: "FP32", shape: [2], data: [1, 2] };

/** POSTs a load or unload of `name`; fails if no answer comes within `withinMs`. */
function control(url: string, name: string, action: "load" | "unload", withinMs = 30_000): Promise<Reply> {
  return send(`${url}/v2/repository/models/${name}/${action}`, { method: "POST", body: "", signal: AbortSignal.timeout(withinMs) });
}

/** The index row of `name`. */
async function indexRow(url: string, name: string): Promise<{ state: string; reason: string } | undefined> {
  const index = await send(`${url}/v2/repository/index`, { method: "POST", body: "" });
  return (index.json as { name: string; state: string; reason: string }[]).find((e) => e.name === name);
}

async function modelReady(url: string, name: string): Promise<number> {
  return (await send(`${url}/v2/models/${name}/ready`)).status;
}

describe("control requests on a running server", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let url: string;

  before(async () => {
    for (const name of ["twice", "fresh", "busy", "cut", "mixed"]) repo.module(name, "scale.ts", { parameters: { initMs: 1000 } });
    server = await serveRepository(repo.dir, ["--workers", "2", ...CONTROL]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("two concurrent reloads of one model are both answered 200", async () => {
    const replies = await Promise.all([control(url, "twice", "load"), control(url, "twice", "load")]);
    assert.deepEqual(replies.map((r) => r.status), [200, 200], replies.map((r) => r.text).join(" "));
    assert.equal(await modelReady(url, "twice"), 200);
  });

  test("two concurrent loads of an unloaded model are both answered 200 and it is ready", async () => {
    assert.equal((await control(url, "fresh", "unload")).status, 200);
    const replies = await Promise.all([control(url, "fresh", "load"), control(url, "fresh", "load")]);
    assert.deepEqual(replies.map((r) => r.status), [200, 200], replies.map((r) => r.text).join(" "));
    assert.equal(await modelReady(url, "fresh"), 200);
  });

  test("a load sent during an unload is answered, and the model ends loaded", async () => {
    // A request in a worker makes the unload wait for it.
    const running = send(`${url}/v2/models/busy/infer`, { method: "POST", body: JSON.stringify({ parameters: { sleepMs: 1500 }, inputs: [X] }), headers: { "content-type": "application/json" } });
    await sleep(300);
    const unload = control(url, "busy", "unload");
    await sleep(300);
    const load = control(url, "busy", "load");
    assert.equal((await running).status, 200);
    assert.equal((await unload).status, 200);
    const loaded = await load;
    assert.equal(loaded.status, 200, loaded.text);
    assert.equal(await modelReady(url, "busy"), 200);
    assert.equal((await indexRow(url, "busy"))?.state, "READY");
  });

  test("an unload sent during a load is answered, and so is the load", async () => {
    assert.equal((await control(url, "cut", "unload")).status, 200);
    const load = control(url, "cut", "load");
    await sleep(300);
    const unload = control(url, "cut", "unload");
    const [loaded, unloaded] = await Promise.all([load, unload]);
    assert.equal(loaded.status, 200, loaded.text);
    assert.equal(unloaded.status, 200, unloaded.text);
    assert.deepEqual(await indexRow(url, "cut"), { name: "cut", state: "UNAVAILABLE", reason: "unloaded" });
  });

  test("20 mixed concurrent loads and unloads of one model are all answered, and the server is ready after", async () => {
    const actions = Array.from({ length: 20 }, (_, i) => (i % 3 === 1 ? "unload" : "load") as "load" | "unload");
    const replies = await Promise.all(actions.map(async (action, i) => {
      await sleep(i * 40);
      return control(url, "mixed", action);
    }));
    for (const [i, reply] of replies.entries()) {
      // 200, or: nothing to unload (404), or too many operations on the model at once (409).
      assert.ok([200, 404, 409].includes(reply.status), `${actions[i]}: ${reply.status} ${reply.text}`);
    }
    assert.ok(replies.some((r) => r.status === 200));
    const load = await control(url, "mixed", "load");
    assert.equal(load.status, 200, load.text);
    assert.equal(await modelReady(url, "mixed"), 200);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200);
  });
});

describe("a load during start-up", () => {
  const repo = new ModelRepo();
  let server: ServerProcess | undefined;

  before(() => repo.module("early", "scale.ts", { parameters: { initMs: 3000 } }));
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("is answered once the model is loaded, and the server becomes ready", async () => {
    server = new ServerProcess(CLI, ["serve", "--model-repository", repo.dir, "--port", "0", "--address", "127.0.0.1", "--workers", "2", "--log-level", "debug", ...CONTROL]);
    const listening = await server.waitForLog((l) => l.msg?.startsWith("listening on http://") ?? false, 30_000);
    server.port = listening.port as number;
    // One load before the workers are up, one while the model loads at start.
    const first = control(server.url, "early", "load");
    await waitFor("both workers to start", () => (server!.logs().filter((l) => l.msg === "worker ready").length === 2 ? true : undefined), 30_000);
    const second = control(server.url, "early", "load");
    const replies = await Promise.all([first, second]);
    assert.deepEqual(replies.map((r) => r.status), [200, 200], replies.map((r) => r.text).join(" "));
    assert.equal(await modelReady(server.url, "early"), 200, "a load is answered once the model is loaded");
    await server.waitForLog((l) => l.msg === "ready", 30_000);
    assert.equal((await send(`${server.url}/v2/health/ready`)).status, 200);
  });
});

describe("a control request's deadline", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;

  before(async () => {
    repo.module("quick", "scale.ts");
    server = await serveRepository(repo.dir, ["--workers", "1", "--control-timeout", "1000", ...CONTROL]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("a load slower than --control-timeout is answered 503 in time, and the model is ready later", async () => {
    repo.module("glacial", "scale.ts", { parameters: { initMs: 4000 } });
    const reply = await control(server.url, "glacial", "load", 10_000);
    assert.equal(reply.status, 503, reply.text);
    assert.match(reply.json.error, /^service unavailable: the load of model 'glacial' is still under way after 1000 ms/);
    assert.ok(reply.elapsedMs < 5000, `answered after ${reply.elapsedMs} ms`);
    assert.equal((await indexRow(server.url, "glacial"))?.state, "LOADING");
    const end = Date.now() + 20_000;
    while (Date.now() < end && (await indexRow(server.url, "glacial"))?.state !== "READY") await sleep(200);
    assert.equal((await indexRow(server.url, "glacial"))?.state, "READY");
    assert.equal(await modelReady(server.url, "glacial"), 200);
  });
});
