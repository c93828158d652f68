/**
 * examples/digits/server.ts: a scikit-learn model trained in Python and served by a Python stage,
 * and the same model exported to ONNX and served by a TypeScript stage, answering alike on the
 * images it did not learn from. The Python is the venv of test/python-helpers.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { MODEL_DIR } from "../examples/digits/model-files.js";
import { RAN_ONCE, assertError, post, startServer, type ServerProcess } from "./helpers.js";
import { pythonSdk } from "./python-helpers.js";

// The example does not depend on the runtime under test; the SDK's tests run on each.
const sdk = RAN_ONCE === undefined ? pythonSdk() : { skip: RAN_ONCE };

describe("examples/digits", { skip: sdk.skip ?? false }, () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer("examples/digits/server.ts", { env: { SHOAL_PYTHON: "python" in sdk ? sdk.python : "" }, startTimeoutMs: 120_000 });
  });
  after(() => server?.stop());

  test("the Python stage and the exported ONNX model give the same answers, batched, and right on held-out images", async () => {
    const held = JSON.parse(readFileSync(join(MODEL_DIR, "held-out.json"), "utf8")) as { pixels: number[][]; digits: number[] };
    const n = 60;
    const ask = (route: string) => Promise.all(held.pixels.slice(0, n).map((pixels) => post(`${server.url}${route}`, { pixels })));
    const [python, onnx] = await Promise.all([ask("/digits"), ask("/digits-onnx")]);
    let right = 0;
    for (let i = 0; i < n; i++) {
      assert.equal(python[i]!.status, 200, python[i]!.text);
      assert.equal(onnx[i]!.status, 200, onnx[i]!.text);
      const [a, b] = [python[i]!.json, onnx[i]!.json];
      assert.equal(a.digit, b.digit, `image ${i}`);
      a.probabilities.forEach((p: number, k: number) => assert.ok(Math.abs(p - b.probabilities[k]) < 1e-5, `image ${i}, digit ${k}: ${p} against ${b.probabilities[k]}`));
      if (a.digit === held.digits[i]) right++;
    }
    assert.ok(right / n >= 0.9, `${right} of ${n} held-out images read right`);
  });

  test("a malformed image is a 422 that says what an image is, on both", async () => {
    assertError(await post(`${server.url}/digits`, { pixels: [1, 2] }), 422, "request validation error: 'pixels' must be 64 numbers from 0 to 16, the 8 × 8 image row by row");
    assertError(await post(`${server.url}/digits-onnx`, { pixels: [1, 2] }), 422, /^request validation error: pixels: /);
  });
});
