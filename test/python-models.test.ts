/**
 * Python models on the shared pool: a repository with a TypeScript model and models of the
 * `"python"` runtime (test/fixtures/python/scale_model.py), the Python ones hosted by Python
 * workers of the pool, all loaded and unloaded through the repository API; binary tensors that
 * reach Python as read-only numpy views; batches with a bad request failing alone; a Python
 * model that cannot load failing alone; and the Python workers killed under load and replaced.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client, HttpError, outputOf } from "shoal/client";
import { RAN_ONCE, childPids, fixture, metric, post, waitFor, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";
import { pythonSdk } from "./python-helpers.js";

const sdk = RAN_ONCE === undefined ? pythonSdk() : { skip: RAN_ONCE };
const X = (values: number[]) => ({ inputs: [{ name: "x", data: Float32Array.from(values) }] });

describe("Python models on the shared pool", { skip: sdk.skip ?? false }, () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let client: Client;

  // A model of the "python" runtime whose class file is copied into its folder.
  const pythonModel = (name: string, settings: Record<string, unknown>) => {
    mkdirSync(join(repo.dir, name), { recursive: true });
    copyFileSync(fixture(join("python", "scale_model.py")), join(repo.dir, name, "scale_model.py"));
    repo.settings(name, { name, runtime: "python", class: "scale_model.py:Scale", ...settings });
  };

  before(async () => {
    repo.module("upper", "upper.ts");
    pythonModel("scale", { maxBatchSize: 8, maxWaitMs: 50, parameters: { factor: 3 } });
    pythonModel("broken", { parameters: { fail: true } });
    const python = "python" in sdk ? sdk.python : "";
    server = await serveRepository(repo.dir, ["--model-control", "explicit", "--python-workers", "2"], { SHOAL_PYTHON: python });
    client = new Client(server.url);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("a TypeScript model and a Python model answer side by side; the one that cannot load fails alone", async () => {
    const index = await client.v2.repositoryIndex();
    assert.deepEqual(index.map((e) => [e.name, e.state]).sort(), [["broken", "UNAVAILABLE"], ["scale", "READY"], ["upper", "READY"]]);
    assert.match(index.find((e) => e.name === "broken")?.reason ?? "", /RuntimeError: this model is set to fail at load/);
    const upper = await client.v2.infer("upper", { inputs: [{ name: "text", datatype: "BYTES", data: ["shoal"] }] });
    assert.equal(new TextDecoder().decode(outputOf(upper, "upper").data[0] as Uint8Array), "SHOAL");
    const scaled = await client.v2.infer("scale", X([1, 2, 3]), { binary: true });
    assert.deepEqual([...outputOf(scaled, "y").data], [3, 6, 9]);
    assert.equal(scaled.model_name, "scale");
    // Binary data reached forward() as a numpy array viewing the request's bytes, not a copy.
    assert.deepEqual([...outputOf(scaled, "view").data], [1]);
    const json = await client.v2.infer("scale", X([0.5]));
    assert.deepEqual([...outputOf(json, "y").data], [1.5]);
    assert.deepEqual(await client.v2.modelMetadata("scale").then((m) => m.inputs), [{ name: "x", datatype: "FP32", shape: [-1] }]);
    // The Python workers are their own part of the pool, in the metrics as such; a model is on `replicas` of them.
    assert.equal(await metric(server.url, "shoal_stage_workers_backing_off", { stage: "python-models" }), 0);
    assert.equal(await metric(server.url, "shoal_stage_live_workers", { model: "scale" }), 1);
    assert.equal(await metric(server.url, "shoal_model_replicas", { model: "scale", version: "", pool: "python-models" }), 1);
    assert.equal(await metric(server.url, "shoal_model_replicas", { model: "upper", version: "", pool: "models" }), 1);
    assert.equal(await metric(server.url, "shoal_model_state", { model: "broken", version: "", state: "failed" }), 1);
  });

  test("concurrent requests to a Python model share batches, and a bad request fails alone", async () => {
    const replies = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        post(`${server.url}/v2/models/scale/infer`, { id: `r${i}`, inputs: [{ name: i === 7 ? "z" : "x", datatype: "FP32", shape: [1], data: [i] }] }),
      ),
    );
    replies.forEach((reply, i) => {
      if (i === 7) {
        assert.equal(reply.status, 422, reply.text);
        assert.match(reply.json.error, /input 'x' is missing/);
        return;
      }
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.id, `r${i}`);
      assert.deepEqual(reply.json.outputs.find((o: { name: string }) => o.name === "y").data, [3 * i]);
    });
    const batches = replies.filter((r) => r.status === 200).map((r) => r.json.outputs.find((o: { name: string }) => o.name === "batch").data[0] as number);
    assert.ok(Math.max(...batches) > 1, `no batch held two requests: ${batches}`);
    assert.ok(Math.max(...batches) <= 8, `a batch above maxBatchSize: ${batches}`);
  });

  test("Python workers of the pool killed with SIGKILL under load: every request answered once, the workers replaced, the model loaded again", async () => {
    const hosts = childPids(server.proc.pid!).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--models"));
    assert.equal(hosts.length, 2, "two Python workers of the pool");
    // 8 clients sending 8 requests each, one after another; the workers die once 12 are answered.
    let answered = 0;
    const one = (i: number) =>
      client.v2.infer("scale", X([i])).then(
        (r) => [...outputOf(r, "y").data][0],
        (err: unknown) => err,
      ).finally(() => {
        if (++answered === 12) for (const pid of hosts) process.kill(pid, "SIGKILL");
      });
    const clients = Array.from({ length: 8 }, async (_, c) => {
      const out: unknown[] = [];
      for (let k = 0; k < 8; k++) out.push(await one(8 * c + k));
      return out;
    });
    const answers = (await Promise.all(clients)).flat();
    assert.equal(answers.length, 64);
    assert.ok(answers.filter((a) => typeof a === "number").length > 12, "requests after the kill are answered too");
    answers.forEach((answer, i) => {
      if (typeof answer === "number") return assert.equal(answer, 3 * i);
      // Only the batch a dead worker held fails, with 500 `worker died`; queued ones wait for the replacement.
      assert.ok(answer instanceof HttpError && answer.status === 500 && /worker died/.test(answer.message), String(answer));
    });
    await waitFor("scale loaded again on a replacement", async () => ((await client.v2.modelReady("scale")) ? true : undefined), 30_000);
    assert.deepEqual([...outputOf(await client.v2.infer("scale", X([5])), "y").data], [15]);
    const replaced = childPids(server.proc.pid!).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--models"));
    assert.equal(replaced.length, 2);
    assert.ok(!replaced.some((pid) => hosts.includes(pid)), "the killed workers are gone");
  });

  test("Python and TypeScript models unload and load again through the repository API", async () => {
    await client.v2.unload("scale");
    await client.v2.unload("upper");
    for (const name of ["scale", "upper"]) {
      await assert.rejects(client.v2.infer(name, X([1])), (err: unknown) => err instanceof HttpError && err.status === 404);
    }
    await client.v2.load("scale");
    await client.v2.load("upper");
    assert.deepEqual([...outputOf(await client.v2.infer("scale", X([2]), { binary: true }), "y").data], [6]);
    assert.deepEqual((await client.v2.repositoryIndex({ ready: true })).map((e) => e.name).sort(), ["scale", "upper"]);
    // A load of the model that cannot load says why, and the others stay.
    await assert.rejects(client.v2.load("broken"), (err: unknown) => err instanceof HttpError && err.status === 500 && /this model is set to fail at load/.test(err.message));
    assert.equal((await client.v2.infer("scale", X([1]))).model_name, "scale");
  });
});
