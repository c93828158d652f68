/**
 * The standard Python clients of the V2 protocol, unchanged from PyPI, against `shoal serve
 * --model-repository` with gRPC on: tritonclient[grpc] (sync, async_infer, asyncio, a stream of
 * 100 requests, the repository, configuration, statistics and an error of each status),
 * tritonclient[http] with gzip both ways, kserve's gRPC and REST clients, and tritonclient calling a
 * route of stages served as a V2 model. They are installed into a virtual environment in the
 * system's temporary folder; without Python or PyPI the test is skipped, saying why, and so are
 * kserve's clients when the package cannot be installed.
 */
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { fixture, startServer, type ServerProcess } from "./helpers.js";
import { freePort } from "./grpc-helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

const VENV = join(tmpdir(), "shoal-grpc-venv");
const PYTHON = join(VENV, "bin", "python");
const TOKEN = "py-token";

// The venv's Python with the clients, or why there is none; kserve may be missing alone.
function installClients(): { python: string; kserve: string | undefined } | { skip: string } {
  const has = (module: string) => {
    try {
      execFileSync(PYTHON, ["-c", `import ${module}`], { stdio: "pipe" });
      return true;
    } catch {
      return false;
    }
  };
  try {
    if (!existsSync(PYTHON)) execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
    if (!has("tritonclient.grpc") || !has("tritonclient.http")) execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", "tritonclient[grpc,http]"], { stdio: "pipe", timeout: 300_000 });
  } catch (err) {
    return { skip: `tritonclient[grpc,http] could not be installed from PyPI (${why(err)})` };
  }
  if (has("kserve")) return { python: PYTHON, kserve: undefined };
  try {
    execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", "kserve"], { stdio: "pipe", timeout: 300_000 });
    return { python: PYTHON, kserve: undefined };
  } catch (err) {
    return { python: PYTHON, kserve: `kserve could not be installed on this Python (${why(err)})` };
  }
}

function why(err: unknown): string {
  return (err as { stderr?: Buffer }).stderr?.toString().trim().split("\n").at(-1) ?? (err as Error).message;
}

const clients = installClients();

describe("the Python clients of the V2 protocol", { skip: "skip" in clients ? clients.skip : false }, () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  let grpcPort: number;

  before(async () => {
    repo.module("echo", "echo.ts", { maxBatchSize: 8, maxWaitMs: 2 });
    repo.module("slow", "echo.ts", {});
    repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
    grpcPort = await freePort();
    server = await serveRepository(repo.dir, ["--grpc-port", String(grpcPort), "--workers", "2", "--model-control", "explicit", "--max-request-size", "300000"], { SHOAL_ADMIN_TOKEN: TOKEN });
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("tritonclient[grpc] (gzip too) and tritonclient[http] with gzip work unchanged", async () => {
    const { python } = clients as { python: string };
    const { stdout } = await promisify(execFile)(python, [fixture("grpc-clients.py"), "127.0.0.1", String(grpcPort), String(server.port), TOKEN], { timeout: 180_000 });
    const out = JSON.parse(stdout);
    assert.equal(out.live, true);
    assert.equal(out.ready, true);
    assert.equal(out.server.name, "shoal");
    assert.equal(out.model_ready, true);
    assert.equal(out.metadata.name, "scale");
    const all = { f32: true, i64: true, txt: true, f16: true, flag: true };
    assert.deepEqual(out.sync, { id: "py-1", echoed: all });
    assert.deepEqual(out.requested, ["f16_out"]);
    assert.deepEqual(out.async, { error: null, echoed: all });
    assert.deepEqual(out.stream, { ok: 99, right: 99, errors: ["bad request: number 42"] });
    assert.deepEqual(out.index, ["echo:READY", "scale:READY", "slow:READY"]);
    assert.deepEqual(out.after_unload, ["echo", "slow"]);
    assert.equal(out.reloaded, true);
    assert.equal(out.config.name, "echo");
    assert.equal(out.config.dynamic_batching.max_queue_delay_microseconds, "2000");
    assert.equal(out.stats.name, "echo");
    assert.ok(out.stats.inference_count >= 103, JSON.stringify(out.stats));
    assert.deepEqual(out.errors.not_found, ["StatusCode.NOT_FOUND", "not found: model 'nope'"]);
    assert.deepEqual(out.errors.invalid, ["StatusCode.INVALID_ARGUMENT", "bad request: no"]);
    assert.equal(out.errors.unauthenticated[0], "StatusCode.UNAUTHENTICATED");
    assert.equal(out.errors.deadline[0], "StatusCode.DEADLINE_EXCEEDED");
    assert.equal(out.errors.too_large[0], "StatusCode.RESOURCE_EXHAUSTED");
    assert.equal(out.errors.internal[0], "StatusCode.INTERNAL");
    assert.deepEqual(out.aio, { live: true, echoed: true });
    assert.equal(out.grpc_gzip, true);
    assert.equal(out.grpc_gzip_stream, true);
    assert.equal(out.http_gzip, true);
  });

  test("kserve's InferenceGRPCClient and InferenceRESTClient work unchanged", async (t) => {
    const { python, kserve } = clients as { python: string; kserve: string | undefined };
    if (kserve !== undefined) {
      t.skip(kserve);
      return;
    }
    const { stdout } = await promisify(execFile)(python, [fixture("kserve-clients.py"), "127.0.0.1", String(grpcPort), String(server.port)], { timeout: 120_000 });
    assert.deepEqual(JSON.parse(stdout), { grpc: [[1, 2]], grpc_live: true, grpc_ready: true, rest: [[1, 2]] });
  });

  test("tritonclient calls a route of stages served as a V2 model, over gRPC and HTTP", async () => {
    const { python } = clients as { python: string };
    const port = await freePort();
    const routes = await startServer(fixture("route-model.ts"), { args: ["--grpc-port", String(port)] });
    try {
      const { stdout } = await promisify(execFile)(python, [fixture("route-model-clients.py"), "127.0.0.1", String(port), String(routes.port)], { timeout: 60_000 });
      const expected = { ready: true, upper: ["A", "PIPELINE", "FROM", "TRITONCLIENT"], count: [4], scaled: [6], long: [true] };
      assert.deepEqual(JSON.parse(stdout), { grpc: expected, http: expected });
    } finally {
      await routes.stop();
    }
  });
});

