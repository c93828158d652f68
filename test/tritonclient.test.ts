/**
 * Triton's own Python client, `tritonclient[http]` from PyPI, against `shoal serve
 * --model-repository`: health, metadata, binary FP32 and BYTES inference, parameters, statistics,
 * the repository index, unload and load. The client is installed into a virtual environment
 * kept in the system's temporary folder; without Python or PyPI the test is skipped, saying why.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fixture, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

const VENV = join(tmpdir(), "shoal-tritonclient-venv");
const PYTHON = join(VENV, "bin", "python");

// The venv's Python with tritonclient, or why there is none.
function installClient(): { python: string } | { skip: string } {
  try {
    if (!existsSync(PYTHON)) execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
    execFileSync(PYTHON, ["-c", "import tritonclient.http"], { stdio: "pipe" });
    return { python: PYTHON };
  } catch {
    // Not installed yet, or no Python: install it below.
  }
  try {
    execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", "tritonclient[http]"], { stdio: "pipe", timeout: 300_000 });
    return { python: PYTHON };
  } catch (err) {
    const why = (err as { stderr?: Buffer }).stderr?.toString().trim().split("\n").at(-1) ?? (err as Error).message;
    return { skip: `tritonclient[http] could not be installed from PyPI (${why})` };
  }
}

const client = installClient();

describe("tritonclient[http]", { skip: "skip" in client ? client.skip : false }, () => {
  const repo = new ModelRepo();
  let server: ServerProcess;

  before(async () => {
    repo.mlp("mlp", "1", { inputs: 4, hidden: 8, layers: 1, outputs: 3 });
    repo.settings("mlp", { name: "mlp", runtime: "onnx", maxBatchSize: 8, maxWaitMs: 2 });
    repo.module("upper", "upper.ts", { parameters: { prefix: "" } });
    server = await serveRepository(repo.dir, ["--workers", "2", "--model-control", "explicit"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("drives the server through the V2 protocol, binary data and the repository included", () => {
    const python = (client as { python: string }).python;
    const out = JSON.parse(execFileSync(python, [fixture("tritonclient-run.py"), `127.0.0.1:${server.port}`], { encoding: "utf8", timeout: 60_000 }));
    assert.equal(out.live, true);
    assert.equal(out.ready, true);
    assert.deepEqual(out.server.extensions, ["binary_tensor_data", "model_repository", "model_configuration", "statistics"]);
    assert.equal(out.model_ready, true);
    assert.deepEqual(out.metadata.inputs, [{ name: "input", datatype: "FP32", shape: [-1, 4] }]);
    assert.equal(out.fp32.id, "tc-1");
    assert.equal(out.fp32.output.length, 2);
    out.fp32.output.flat().forEach((v: number, i: number) => assert.ok(Math.abs(v - out.fp32_json.flat()[i]) < 1e-6));
    assert.deepEqual(out.bytes, { upper: ["SHOAL?", "TRITON?"], length: [6, 7] });
    assert.equal(out.stats.model_stats[0].name, "mlp");
    assert.equal(out.stats.model_stats[0].inference_count, 2);
    assert.deepEqual(out.index.map((e: { name: string }) => e.name).sort(), ["mlp", "upper"]);
    assert.equal(out.after_unload, false);
    assert.equal(out.after_load, true);
    assert.equal(out.unknown.status, "404");
  });
});
