/**
 * The runtime under the server: node:http on Node, Bun.serve on Bun (the start-up line says which),
 * and `bunx --bun shoal serve` in a project that depends on Shoal.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { ROOT, RUNTIME, fixture, post, startCommand, startServer } from "./helpers.js";
import { ModelDir } from "./onnx-helpers.js";

describe("the runtime's HTTP server", () => {
  test(`on ${RUNTIME}, the front answers through ${RUNTIME === "bun" ? "Bun.serve" : "node:http"}`, async () => {
    const server = await startServer(fixture("basic.ts"));
    try {
      const listening = server.logs().find((l) => l.msg?.startsWith("listening on"));
      assert.equal(listening?.http, RUNTIME === "bun" ? "Bun.serve" : "node:http");
      const reply = await post(`${server.url}/inference`, { n: 3 });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.json.echo, { n: 3 });
    } finally {
      await server.stop();
    }
  });

  test("bunx --bun shoal serve, in a project that depends on Shoal", { skip: RUNTIME === "bun" ? undefined : "runs on Bun (SHOAL_TEST_RUNTIME=bun)" }, async () => {
    const project = mkdtempSync(join(tmpdir(), "shoal-bunx-"));
    const models = new ModelDir();
    // The project as npm would install it: the package under node_modules, its command linked in .bin.
    mkdirSync(join(project, "node_modules", ".bin"), { recursive: true });
    symlinkSync(ROOT, join(project, "node_modules", "shoal"), "dir");
    symlinkSync(join("..", "shoal", "dist", "cli", "main.js"), join(project, "node_modules", ".bin", "shoal"));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "uses-shoal", private: true, dependencies: { shoal: "*" } }));
    const model = models.mlp("tiny", { inputs: 4, hidden: 8, layers: 1, outputs: 3 });
    let stop = () => {};
    try {
      const { proc, port, output } = await startCommand("bunx", ["--bun", "shoal", "serve", model, "--port", "0", "--address", "127.0.0.1", "--log-format", "json"], project, 30_000);
      stop = () => proc.kill("SIGTERM");
      assert.match(output(), /"http":"Bun.serve"/);
      const reply = await post(`http://127.0.0.1:${port}/inference`, { input: [[1, 2, 3, 4]] });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.output[0].length, 3);
    } finally {
      stop();
      models.remove();
      rmSync(project, { recursive: true, force: true });
    }
  });
});
