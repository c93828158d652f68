/**
 * MLServer's settings files as Shoal reads them: a `model-settings.json` in MLServer's format
 * becomes a model of the "mlserver" runtime (its name, version, batching and parameters as
 * MLServer takes them); `settings.json` (or the MLSERVER_* variables) gives the Python workers
 * (`parallel_workers`) and, to `shoal serve`, the ports and address no flag gives.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fromMLServer, isMLServerSettings, mlserverServerSettings, serverParallelWorkers } from "../src/models/mlserver-settings.js";
import { specsOf } from "../src/models/repository.js";
import { SettingsError, readSettingsFile } from "../src/models/settings.js";
import { freePort } from "./grpc-helpers.js";
import { ServerProcess } from "./helpers.js";
import { ModelRepo } from "./model-helpers.js";
import { CLI } from "./onnx-helpers.js";

describe("MLServer's settings files", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-mlserver-settings-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("a file naming an implementation and no runtime is MLServer's", () => {
    assert.equal(isMLServerSettings({ implementation: "models.SumModel" }), true);
    assert.equal(isMLServerSettings({ name: "x", runtime: "onnx" }), false);
    assert.equal(isMLServerSettings({ implementation: "models.SumModel", runtime: "./x.ts" }), false);
  });

  test("batching only when max_batch_size > 1 and max_batch_time > 0 (seconds), as MLServer's adaptive batching", () => {
    const batching = (max_batch_size: number, max_batch_time: number) => {
      const { maxBatchSize, maxWaitMs } = fromMLServer({ implementation: "m.M", max_batch_size, max_batch_time }, "/x/m");
      return [maxBatchSize, maxWaitMs];
    };
    assert.deepEqual(batching(10, 0.4), [10, 400]);
    assert.deepEqual(batching(10, 0), [1, 0]);
    assert.deepEqual(batching(1, 0.4), [1, 0]);
    assert.deepEqual(batching(0, 0), [1, 0]);
  });

  test("an empty name is the folder's, the version is parameters.version, and the file goes to the runtime as written", () => {
    const written = { name: "", implementation: "models.SumModel", versions: ["sum/v1"], parameters: { version: "v1.2.3", extra: { a: 1 } } };
    const file = join(dir, "model-settings.json");
    writeFileSync(file, JSON.stringify(written));
    const [spec, ...more] = specsOf(readSettingsFile(file), dir, file);
    assert.equal(more.length, 0);
    assert.equal(spec!.name, dir.split("/").at(-1));
    assert.equal(spec!.version, "v1.2.3");
    assert.equal(spec!.runtime, "mlserver");
    assert.equal(spec!.class, "models.SumModel");
    assert.deepEqual(spec!.mlserver, written);
    assert.deepEqual(spec!.parameters, written.parameters);
  });

  test("a file in MLServer's format with a mistake names the file and the field", () => {
    const file = join(dir, "model-settings.json");
    writeFileSync(file, JSON.stringify({ implementation: "models.SumModel", max_batch_size: "ten" }));
    assert.throws(() => readSettingsFile(file), (err: unknown) => err instanceof SettingsError && err.message.startsWith(`${file}: max_batch_size: `));
  });

  test("settings.json's parallel_workers is the Python workers; 0 (MLServer's main process) is one", () => {
    assert.equal(serverParallelWorkers(dir), undefined);
    for (const [workers, expected] of [[3, 3], [0, 1]] as const) {
      writeFileSync(join(dir, "settings.json"), JSON.stringify({ debug: true, parallel_workers: workers }));
      assert.equal(serverParallelWorkers(dir), expected);
    }
    writeFileSync(join(dir, "settings.json"), JSON.stringify({ parallel_workers: -1 }));
    assert.throws(() => serverParallelWorkers(dir), /settings\.json: parallel_workers: a whole number of workers, not -1/);
  });

  test("MLSERVER_* variables fill the fields settings.json leaves out; the file wins, as MLServer reads them", () => {
    const env = { MLSERVER_PARALLEL_WORKERS: "4", MLSERVER_HTTP_PORT: "9080", MLSERVER_SERVER_NAME: "from-env", MLSERVER_EXTENSIONS: '["a", "b"]' };
    writeFileSync(join(dir, "settings.json"), JSON.stringify({ parallel_workers: 2, grpc_port: 9081, host: "127.0.0.1" }));
    assert.deepEqual(mlserverServerSettings(dir, env), { parallel_workers: 2, http_port: 9080, grpc_port: 9081, host: "127.0.0.1", server_name: "from-env", extensions: ["a", "b"] });
    assert.equal(serverParallelWorkers(dir, env), 2);
    rmSync(join(dir, "settings.json"));
    assert.equal(serverParallelWorkers(dir, env), 4);
    assert.deepEqual(mlserverServerSettings(dir, {}), {});
    assert.throws(() => mlserverServerSettings(dir, { MLSERVER_HTTP_PORT: "80800" }), /^Error: MLSERVER_HTTP_PORT: http_port: a TCP port, not 80800$/);
    assert.throws(() => mlserverServerSettings(dir, { MLSERVER_EXTENSIONS: "a,b" }), /^Error: MLSERVER_EXTENSIONS: not JSON: a,b$/);
  });
});

describe("shoal serve on an MLServer repository's settings", () => {
  const repo = new ModelRepo();
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("its http_port, grpc_port and host (settings.json, else MLSERVER_*) where no flag or SHOAL_* variable says", async () => {
    const [http, grpc] = [await freePort(), await freePort()];
    repo.module("echo", "echo.ts");
    writeFileSync(join(repo.dir, "settings.json"), JSON.stringify({ grpc_port: grpc, host: "127.0.0.1" }));
    // The test's servers run with SHOAL_GRPC_PORT=0, which wins over the file's grpc_port.
    server = new ServerProcess(CLI, ["serve", "--model-repository", repo.dir], { MLSERVER_HTTP_PORT: String(http) });
    const listening = await server.waitForLog((l) => l.msg?.startsWith("listening on http://") ?? false, 30_000);
    assert.equal(listening.msg, `listening on http://127.0.0.1:${http}`);
    await server.waitForLog((l) => l.msg === "ready", 30_000);
    assert.equal(server.logs().find((l) => l.msg?.startsWith("gRPC listening")), undefined);
  });
});
