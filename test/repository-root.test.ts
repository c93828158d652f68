/**
 * A repository folder that is itself one model's folder, as KServe's storage initializer leaves
 * `/mnt/models`: a folder with a model-settings.json, or bare ONNX files (directly or in version
 * folders), served under `--model-name` or the name they carry; and a repository in the layout of
 * a Kubernetes ConfigMap volume, as the Helm chart mounts one.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, describe, test } from "node:test";
import { Client, outputOf } from "shoal/client";
import { fixture, runToExit } from "./helpers.js";
import { makeMlp } from "./fixtures/make-mlp.js";
import { serveRepository } from "./model-helpers.js";
import { CLI } from "./onnx-helpers.js";

const X = { inputs: [{ name: "x", data: Float32Array.of(1, 2) }] };
const INPUT = { inputs: [{ name: "input", data: Float32Array.of(1, 2, 3, 4), shape: [1, 4] }] };
const notFound = { name: "HttpError", status: 404 };

describe("a repository that is one model's folder", () => {
  const dirs: string[] = [];
  // A fresh folder named `name` (in a temporary folder of its own).
  const folder = (name: string): string => {
    const parent = mkdtempSync(join(tmpdir(), "shoal-root-"));
    dirs.push(parent);
    const dir = join(parent, name);
    mkdirSync(dir);
    return dir;
  };
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  test("a folder with a model-settings.json is served under its name, or under --model-name", async () => {
    const dir = folder("mnt-models");
    writeFileSync(join(dir, "package.json"), '{"type": "module"}\n');
    writeFileSync(join(dir, "scale.ts"), `export { default } from ${JSON.stringify(pathToFileURL(fixture(join("models", "scale.ts"))).href)};\n`);
    writeFileSync(join(dir, "model-settings.json"), JSON.stringify({ name: "scale", runtime: "./scale.ts", parameters: { factor: 3 } }));
    let server = await serveRepository(dir);
    try {
      const client = new Client(server.url);
      assert.deepEqual([...outputOf(await client.v2.infer("scale", X), "y").data], [3, 6]);
      assert.deepEqual(await client.v2.repositoryIndex(), [{ name: "scale", state: "READY", reason: "" }]);
    } finally {
      await server.stop();
    }
    server = await serveRepository(dir, [], { SHOAL_MODEL_NAME: "my-isvc" });
    try {
      const client = new Client(server.url);
      assert.equal((await client.v2.infer("my-isvc", X)).model_name, "my-isvc");
      await assert.rejects(client.v2.infer("scale", X), notFound);
    } finally {
      await server.stop();
    }
  });

  test("bare ONNX files, in version folders or not, are an ONNX model named after the folder or --model-name", async () => {
    const versioned = folder("models");
    for (const [version, dout] of [["1", 2], ["2", 3]] as const) {
      mkdirSync(join(versioned, version));
      makeMlp(join(versioned, version, "model.onnx"), { inputs: 4, hidden: 8, layers: 1, outputs: dout });
    }
    let server = await serveRepository(versioned);
    try {
      const client = new Client(server.url);
      assert.deepEqual((await client.v2.modelMetadata("models")).versions, ["1", "2"]);
      const response = await client.v2.infer("models", INPUT);
      assert.deepEqual(response.outputs[0]!.shape, [1, 3], "the greatest version answers");
    } finally {
      await server.stop();
    }
    const flat = folder("flat");
    makeMlp(join(flat, "model.onnx"), { inputs: 4, hidden: 8, layers: 1, outputs: 2 });
    server = await serveRepository(flat, ["--model-name", "mlp"]);
    try {
      const client = new Client(server.url);
      assert.deepEqual((await client.v2.infer("mlp", INPUT)).outputs[0]!.shape, [1, 2]);
      await assert.rejects(client.v2.modelMetadata("flat"), notFound);
    } finally {
      await server.stop();
    }
  });

  test("a repository laid out as a Kubernetes ConfigMap volume (entries that are symlinks into a ..data folder) is served", async () => {
    const dir = folder("configmap");
    // What the kubelet writes: the files in a timestamped folder, ..data pointing at it, and each
    // top-level entry a symlink through ..data.
    const stamped = join(dir, "..2026_12_01_12_00_00.000000001");
    mkdirSync(join(stamped, "scale"), { recursive: true });
    writeFileSync(join(stamped, "package.json"), '{"type": "module"}\n');
    writeFileSync(join(stamped, "scale", "scale.ts"), `export { default } from ${JSON.stringify(pathToFileURL(fixture(join("models", "scale.ts"))).href)};\n`);
    writeFileSync(join(stamped, "scale", "model-settings.json"), JSON.stringify({ name: "scale", runtime: "./scale.ts", parameters: { factor: 5 } }));
    symlinkSync("..2026_12_01_12_00_00.000000001", join(dir, "..data"));
    symlinkSync(join("..data", "scale"), join(dir, "scale"));
    symlinkSync(join("..data", "package.json"), join(dir, "package.json"));
    const server = await serveRepository(dir);
    try {
      const client = new Client(server.url);
      assert.deepEqual([...outputOf(await client.v2.infer("scale", X), "y").data], [5, 10]);
      assert.deepEqual(await client.v2.repositoryIndex(), [{ name: "scale", state: "READY", reason: "" }]);
    } finally {
      await server.stop();
    }
  });

  test("broken root settings make the model UNAVAILABLE with the reason; a bad --model-name stops the command", async () => {
    const dir = folder("broken");
    writeFileSync(join(dir, "model-settings.json"), JSON.stringify({ name: "broken", runtime: "onnx", maxBatchSize: "8" }));
    const server = await serveRepository(dir, ["--model-name", "isvc"]);
    try {
      const index = await new Client(server.url).v2.repositoryIndex();
      assert.equal(index.length, 1, JSON.stringify(index));
      assert.equal(index[0]!.name, "isvc");
      assert.equal(index[0]!.state, "UNAVAILABLE");
      assert.match(index[0]!.reason ?? "", /model-settings\.json: maxBatchSize/);
    } finally {
      await server.stop();
    }
    const bad = await runToExit(CLI, ["serve", "--model-repository", dir, "--model-name", "a/b"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--model-name.*letters, digits/);
  });
});
