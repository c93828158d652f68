/** The `shoal` command: help, `serve` flags, errors and `--dry-run`, and `npx shoal` in this repository. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { ROOT, post, runToExit } from "./helpers.js";
import { CLI, ModelDir, serveModel } from "./onnx-helpers.js";

const run = promisify(execFile);

// npx as a user types it in this repository: npm links the package's own `bin` and runs it.
async function npx(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run("npx", ["--no-install", "shoal", ...args], { cwd: ROOT, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe("help", () => {
  test("npx shoal --help exits 0 and lists serve", async () => {
    const { code, stdout, stderr } = await npx("--help");
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^Usage: shoal \[options\] \[command\]/);
    assert.match(stdout, /serve \[options\] \[model\]/);
  });

  test("npx shoal serve --help exits 0 and lists the stage, session and server flags", async () => {
    const { code, stdout, stderr } = await npx("serve", "--help");
    assert.equal(code, 0, stderr);
    const help = stdout.replace(/\s+/g, " ");
    for (const flag of ["--num <workers>", "--max-batch-size <items>", "--max-wait-ms <ms>", "--route <path>", "--intra-op-threads <n>", "--graph-optimization <level>", "--execution-mode <mode>"]) {
      assert.ok(help.includes(flag), `serve --help lacks ${flag}`);
    }
    // The server's own flags come from the same table as Server.run()'s.
    for (const flag of ["--port <number>", "--address <host>", "--timeout <ms>", "--capacity <items>", "--max-request-size <bytes>", "--log-level <level>", "--log-format <format>", "--namespace <prefix>", "--dry-run", "--model-repository <dir>", "--workers <n>", "--model-isolation <kind>", "--model-memory-bytes <bytes>"]) {
      assert.ok(help.includes(flag), `serve --help lacks ${flag}`);
    }
    assert.match(help, /env: SHOAL_MAX_BATCH_SIZE/);
    assert.match(help, /application\/msgpack/);
  });
});

describe("shoal serve", () => {
  const models = new ModelDir();
  let model: string;
  before(() => {
    model = models.mlp("tiny", { inputs: 4, hidden: 8, layers: 1, outputs: 3 });
  });
  after(() => models.remove());

  test("a missing model file: exit 1 with one line that names it", async () => {
    const { code, stderr } = await runToExit(CLI, ["serve", "no-such-model.onnx", "--port", "0"]);
    assert.equal(code, 1, stderr);
    assert.equal(stderr.trim(), "error: cannot read the model file 'no-such-model.onnx'");
  });

  test("a bad flag value: exit 1 with one line that names the flag", async () => {
    const { code, stderr } = await runToExit(CLI, ["serve", model, "--num", "0"]);
    assert.equal(code, 1, stderr);
    assert.match(stderr.trim(), /^error: option '--num <workers>' argument '0' is invalid\./);
  });

  test("--dry-run warms up one worker on zeros, runs them through the stage and exits 0", async () => {
    const { code, stdout, stderr } = await runToExit(CLI, ["serve", model, "--dry-run"]);
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    assert.match(stdout, /^\/inference: tiny_1 [\d.]+ ms => 200, \d+ bytes of application\/json/m);
  });

  test("flags and SHOAL_* variables set the stage, flags first: workers, batch size, wait and route", async () => {
    const server = await serveModel(model, ["--num", "2", "--max-wait-ms", "3", "--route", "/predict"], { SHOAL_MAX_BATCH_SIZE: "8", SHOAL_NUM: "3" });
    try {
      const listening = server.logs().find((l) => l.msg?.startsWith("listening on"));
      assert.deepEqual(listening?.routes, { "/predict": ["tiny_1"] });
      assert.deepEqual(listening?.stages, [{ name: "tiny_1", num: 2, maxBatchSize: 8, maxWaitMs: 3 }]);
      const reply = await post(`${server.url}/predict`, { input: [[1, 2, 3, 4]] });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.output[0].length, 3);
      assert.equal((await post(`${server.url}/inference`, { input: [[1, 2, 3, 4]] })).status, 404);
    } finally {
      await server.stop();
    }
  });
});
