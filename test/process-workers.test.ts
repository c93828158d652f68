/** Stages with `isolation: "process"`: same answers as threads, real environment, crashes contained. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import type { Channel, ChannelFactory } from "../dist/workers/channel.js";
import type { FromWorker, WorkerBoot } from "../dist/workers/messages.js";
import { processChannel } from "../dist/workers/process-channel.js";
import { threadChannel } from "../dist/workers/thread-channel.js";
import { assertError, fixture, post, processAlive, runToExit, startServer, waitFor, waitForMetric, type Reply, type ServerProcess } from "./helpers.js";

// Sum of k / 2 for k in 0..n-1.
const sumTo = (n: number) => (n * (n - 1)) / 4;

// Sends rounds of 8 requests until `done` says the answers are enough.
async function until(url: string, done: (reply: Reply) => boolean, rounds = 20): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const replies = await Promise.all(Array.from({ length: 8 }, () => post(url, {})));
    for (const reply of replies) assert.equal(reply.status, 200, reply.text);
    if (replies.map(done).includes(true)) return;
  }
  throw new Error(`no answer from ${url} was enough after ${rounds} rounds`);
}

// One suite for both channels: the pool and the stage must not tell them apart.
for (const [name, factory] of [
  ["thread", threadChannel],
  ["process", processChannel],
] as const) {
  describe(`the ${name} channel`, () => {
    const moduleUrl = pathToFileURL(fixture("process-pipeline.ts")).href;
    const meta = { requestId: "r1", headers: {}, deadline: Date.now() + 60_000, route: "/reverse" };

    // Starts the worker of stage `stageIndex` of process-pipeline.ts and records what it says.
    function open(stageIndex: number, className: string, env?: Record<string, string>) {
      const messages: FromWorker[] = [];
      let exit: string | undefined;
      const boot = { moduleUrl, stageIndex, stageName: `${className}_${stageIndex + 1}`, className, workerId: 1, maxBatchSize: 1, num: 1, limits: { maxTensorElements: 1 << 20, maxBytesElements: 1 << 16 } };
      const channel: Channel = (factory as ChannelFactory)(boot as WorkerBoot, env, {
        message: (message) => messages.push(message),
        exit: (reason) => (exit = reason),
      });
      const next = <K extends FromWorker["kind"]>(kind: K) =>
        waitFor(`a ${kind} message`, () => {
          const at = messages.findIndex((m) => m.kind === kind);
          if (at < 0 && exit !== undefined) throw new Error(`the worker exited: ${exit}`);
          return at < 0 ? undefined : (messages.splice(at, 1)[0] as Extract<FromWorker, { kind: K }>);
        });
      const exited = () => waitFor("the exit", () => exit);
      return { channel, next, exited };
    }

    test("runs a batch: a Float32Array in, response bytes out", async () => {
      const worker = open(3, "Reduce");
      assert.equal((await worker.next("ready")).contentType, "application/json");
      const vec = Float32Array.of(0.5, 1, 1.5);
      worker.channel.send({ kind: "batch", seq: 1, items: [{ payload: vec, ingress: false, egress: true, meta }] }, [vec.buffer]);
      const result = await worker.next("result");
      assert.equal(result.seq, 1);
      const first = result.results?.[0];
      assert.ok(first?.ok === true && first.value instanceof Uint8Array, JSON.stringify(result));
      assert.deepEqual(
        { ...JSON.parse(Buffer.from(first.value).toString()), pid: 0, mainThread: false },
        { type: "Float32Array", length: 3, sum: 3, pid: 0, mainThread: false },
      );
      worker.channel.terminate();
      assert.match(await worker.exited(), name === "thread" ? /exited with code 1/ : /killed by signal SIGKILL/);
    });

    test("gives the worker its env", async () => {
      const worker = open(4, "WhoAmI", { SOME_VAR: `from the ${name} test` });
      await worker.next("ready");
      worker.channel.send({ kind: "batch", seq: 1, items: [{ payload: new TextEncoder().encode("{}"), ingress: true, egress: true, meta }] }, []);
      const first = (await worker.next("result")).results?.[0];
      assert.ok(first?.ok === true, JSON.stringify(first));
      assert.equal(JSON.parse(Buffer.from(first.value as Uint8Array).toString()).someVar, `from the ${name} test`);
      worker.channel.terminate();
      await worker.exited();
    });

    test("a module that registers another class there: fatal, then exit", async () => {
      const worker = open(3, "NotThere");
      assert.match((await worker.next("fatal")).error.message, /registered class Reduce as stage 4 in the worker, where the server has NotThere/);
      assert.ok((await worker.exited()).length > 0);
    });
  });
}

describe("process workers next to thread workers", () => {
  let processes: ServerProcess;
  let threads: ServerProcess;
  before(async () => {
    [processes, threads] = await Promise.all([startServer(fixture("process-pipeline.ts")), startServer(fixture("process-pipeline.ts"), { env: { FIRST_ISOLATION: "thread" } })]);
  });
  after(async () => {
    await Promise.all([processes?.stop(), threads?.stop()]);
  });

  test("a stage in a process answers as the same stage in a thread, errors included", async () => {
    const inputs: unknown[] = [{ n: 1 }, { n: 1000 }, { n: -1 }, { n: 0 }, "n=1"];
    for (const input of inputs) {
      const [fromProcess, fromThread] = [await post(`${processes.url}/embed`, input), await post(`${threads.url}/embed`, input)];
      assert.deepEqual({ status: fromProcess.status, body: fromProcess.json }, { status: fromThread.status, body: fromThread.json }, JSON.stringify(input));
      assert.equal(fromProcess.headers.get("content-type"), fromThread.headers.get("content-type"));
    }
    const reply = await post(`${processes.url}/embed`, { n: 1000 });
    assert.deepEqual(reply.json, { type: "Float32Array", length: 1000, sum: sumTo(1000), batch: 1 });
    assertError(await post(`${processes.url}/embed`, { n: -1 }), 422, "request validation error: 'n' must be a whole number");
    assertError(await post(`${processes.url}/embed`, "n=1"), 400, /^decoding error: /);
  });

  test("a Float32Array from a thread stage reaches a process stage as a Float32Array", async () => {
    const reply = await post(`${processes.url}/reverse`, { n: 1000 });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.type, "Float32Array");
    assert.equal(reply.json.sum, sumTo(1000));
    assert.notEqual(reply.json.pid, processes.proc.pid, "the stage runs in a process of its own");
    assert.equal(reply.json.mainThread, true);
  });

  test("a process stage batches, and each item's array goes on to the thread stage", async () => {
    const ns = Array.from({ length: 16 }, (_, i) => i + 1);
    const replies = await Promise.all(ns.map((n) => post(`${processes.url}/embed`, { n })));
    for (const [i, reply] of replies.entries()) {
      const n = ns[i]!;
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual({ ...reply.json, batch: 0 }, { type: "Float32Array", length: n, sum: sumTo(n), batch: 0 });
      assert.ok(reply.json.batch >= 1 && reply.json.batch <= 4, reply.text);
    }
    const sizes = replies.map((r) => r.json.batch as number);
    assert.ok(
      sizes.some((s) => s > 1),
      `the process stage got batches of more than one item: ${sizes}`,
    );
  });

  test("each process worker sees its own env as its process environment", async () => {
    const seen = new Map<number, { someVar: string; pid: number; mainThread: boolean }>();
    await until(`${processes.url}/env`, (reply) => seen.set(reply.json.workerId, reply.json).size === 2);
    assert.equal(seen.get(1)?.someVar, "first");
    assert.equal(seen.get(2)?.someVar, "second");
    const pids = [seen.get(1)!.pid, seen.get(2)!.pid];
    assert.notEqual(pids[0], pids[1]);
    assert.ok(!pids.includes(processes.proc.pid!));
    assert.ok(seen.get(1)!.mainThread && seen.get(2)!.mainThread, "each worker is the main thread of its own process");
  });

  test("a value MessagePack cannot carry fails its request with 500, not the worker", async () => {
    for (let i = 0; i < 2; i++) assertError(await post(`${processes.url}/cycle`, {}), 500, /^encoding error: /);
    assert.equal((await post(`${processes.url}/reverse`, { n: 2 })).status, 200);
    assert.ok(!processes.logs().some((l) => l.msg === "worker died; replacing it"));
  });

  test("stopping the server stops its process workers", async () => {
    const server = await startServer(fixture("process-pipeline.ts"));
    const { pid } = (await post(`${server.url}/reverse`, { n: 1 })).json as { pid: number };
    assert.ok(processAlive(pid));
    assert.equal(await server.stop(), 0);
    await waitFor("the worker process to end", () => (processAlive(pid) ? undefined : true), 5000);
  });
});

describe("a process worker killed with SIGKILL under load", () => {
  let server: ServerProcess;
  // The server's --timeout: every request must be answered before it, plus a margin for the test's own clock.
  const timeoutMs = 3000;
  before(async () => {
    server = await startServer(fixture("process-crash.ts"), { args: ["--timeout", String(timeoutMs)] });
  });
  after(async () => {
    await server?.stop();
  });

  async function pidsByWorker(): Promise<Map<number, number>> {
    const pids = new Map<number, number>();
    await until(`${server.url}/slow`, (reply) => pids.set(reply.json.workerId, reply.json.pid).size === 2);
    return pids;
  }

  // Kills the process of worker `workerId` while both workers hold a batch; resolves with its pid and every answer of the load.
  async function killUnderLoad(workerId: number): Promise<{ victim: number; replies: Reply[] }> {
    const victim = (await pidsByWorker()).get(workerId)!;
    assert.ok(victim > 0, `worker ${workerId} answered with its pid`);
    const load = Array.from({ length: 40 }, () => post(`${server.url}/slow`, {}));
    // A free worker takes a full batch (4) at once: with that many queued, both workers are busy.
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Slow_1" }, (n) => n >= 4);
    process.kill(victim, "SIGKILL");
    return { victim, replies: await Promise.all(load) };
  }

  test("every request gets one answer in time: 200, or 500 for the batch the dead worker had", async () => {
    const { replies } = await killUnderLoad(1);

    const failed = replies.filter((r) => r.status !== 200);
    for (const reply of failed) assertError(reply, 500, "worker died: the worker running this request died");
    // The worker had a batch of at most maxBatchSize (4) when it died; the others went to its replacement or its peer.
    assert.ok(failed.length >= 1 && failed.length <= 4, `${failed.length} requests failed`);
    for (const reply of replies) assert.ok(reply.elapsedMs < timeoutMs + 1000, `answered after ${reply.elapsedMs.toFixed(0)} ms`);

    const died = await server.waitForLog((l) => l.msg === "worker died; replacing it");
    assert.equal(died.reason, "killed by signal SIGKILL");
    assert.equal(died.worker, 1);
  });

  test("the stage serves again, with a new process in place of the dead one", async () => {
    // A kill of its own (worker 2; the test above kills worker 1), so that this test holds alone.
    const { victim } = await killUnderLoad(2);
    await server.waitForLog((l) => l.msg === "worker died; replacing it" && l.worker === 2);
    assert.ok(!processAlive(victim));
    await waitForMetric(server.url, "shoal_stage_live_workers", { stage: "Slow_1" }, (n) => n === 2, 30_000);
    const pids = await pidsByWorker();
    assert.notEqual(pids.get(2), victim);
    assert.ok([...pids.values()].every(processAlive));
    for (const reply of await Promise.all(Array.from({ length: 8 }, () => post(`${server.url}/slow`, {})))) assert.equal(reply.status, 200, reply.text);
  });

  test("a forward() that overruns timeoutMs gets 408, and its process is killed and replaced", async () => {
    const before = (await post(`${server.url}/spin`, { ms: 0 })).json.pid as number;
    const reply = await post(`${server.url}/spin`, { ms: 10_000 });
    assertError(reply, 408, "forward timeout: forward() did not finish within 300 ms");
    assert.ok(reply.elapsedMs < 2000, `answered after ${reply.elapsedMs.toFixed(0)} ms`);
    await waitFor("the spinning process to end", () => (processAlive(before) ? undefined : true), 5000);
    const after = await post(`${server.url}/spin`, { ms: 0 });
    assert.equal(after.status, 200, after.text);
    assert.notEqual(after.json.pid, before);
  });
});

test("a process worker that cannot start stops the server with its reason", async () => {
  const run = await runToExit(fixture("process-fatal.ts"), ["--port", "0", "--address", "127.0.0.1"]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /NoDevice_1 worker 1 could not start: no device 7 for this worker/);
});
