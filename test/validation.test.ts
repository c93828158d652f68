/** Input schemas: the first stage validates each item in its worker and answers 422 with field paths. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { pack, unpack } from "msgpackr";
import { assertError, fixture, post, runToExit, startServer, type ServerProcess } from "./helpers.js";

const INVALID = "request validation error";

describe("validation by input schemas", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("validation.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  const square = { name: "sq", points: [{ x: 0, y: 0 }, { x: 1, y: 0 }, { x: 1, y: 1 }] };

  test("a valid item reaches forward() parsed: defaults filled in, unknown keys stripped", async () => {
    const reply = await post(`${server.url}/measure`, { ...square, extra: true });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { name: "sq", length: 2, scale: 1, keys: ["name", "points", "scale"] });
  });

  test("a wrong type is a 422 that names the field", async () => {
    assertError(await post(`${server.url}/measure`, { ...square, name: 7 }), 422, `${INVALID}: name: expected string, received number`);
  });

  test("nested fields and array indices are named by their path", async () => {
    const points = [{ x: 0, y: 0 }, { x: "1", y: 0 }];
    assertError(await post(`${server.url}/measure`, { ...square, points }), 422, `${INVALID}: points[1].x: expected number, received string`);
    const style = { color: "red", width: 1.5 };
    assertError(await post(`${server.url}/measure`, { ...square, style }), 422, `${INVALID}: style.width: expected integer, received 1.5`);
    const color = { color: "blue" };
    assertError(await post(`${server.url}/measure`, { ...square, style: color }), 422, /^request validation error: style\.color: .*"red"\|"green"/);
  });

  test("a missing field, a constraint, and several failures at once", async () => {
    assertError(await post(`${server.url}/measure`, { points: square.points }), 422, `${INVALID}: name: missing (expected string)`);
    assertError(await post(`${server.url}/measure`, { name: "dot", points: [{ x: 0, y: 0 }] }), 422, /^request validation error: points: .*2/);
    assertError(await post(`${server.url}/measure`, { name: 1, points: [{ x: null, y: 0 }, {}] }), 422,
      `${INVALID}: name: expected string, received number; points[0].x: expected number, received null; points[1].x: missing (expected number); points[1].y: missing (expected number)`);
    // Five at most, then a count.
    assertError(await post(`${server.url}/measure`, { points: [{}, {}, {}] }), 422, /^request validation error: name: missing \(expected string\); (points\[\d\]\.[xy]: missing \(expected number\); ){4}and 2 more$/);
  });

  test("a body of the wrong shape altogether has no path", async () => {
    assertError(await post(`${server.url}/measure`, [1, 2]), 422, `${INVALID}: expected object, received array`);
  });

  test("invalid JSON is still a decoding error (400), before any schema", async () => {
    assertError(await post(`${server.url}/measure`, "{nope"), 400, /^decoding error: /);
  });

  test("a refinement that throws is a 500, not the client's 422", async () => {
    assertError(await post(`${server.url}/measure`, { ...square, name: "boom" }), 500, "inference internal error");
    await server.waitForLog((l) => typeof l.err === "string" && l.err.includes("refinement bug"));
  });

  test("in a batch, an invalid item fails alone and the others are computed together", async () => {
    const bodies = [square, { ...square, name: 1 }, square, { points: [] }, square, square];
    const replies = await Promise.all(bodies.map((body) => post(`${server.url}/batch`, body)));
    assertError(replies[1]!, 422, `${INVALID}: name: expected string, received number`);
    assertError(replies[3]!, 422, /^request validation error: name: missing \(expected string\); points: /);
    for (const i of [0, 2, 4, 5]) {
      assert.equal(replies[i]!.status, 200, replies[i]!.text);
      // The six requests filled one batch; forward() got the four valid ones.
      assert.deepEqual(replies[i]!.json, { length: 2, batch: 4 });
    }
  });

  test("a typedBatch Worker gets arrays even when its stage does not batch, one item at a time", async () => {
    // Fast items on a stage that does not batch may travel several to a message once the stage
    // has measured them: still one forward() call each.
    for (let i = 0; i < 20; i++) assert.equal((await post(`${server.url}/batch-one`, square)).status, 200);
    const replies = await Promise.all(Array.from({ length: 32 }, () => post(`${server.url}/batch-one`, square)));
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.json, { length: 2, batch: 1 });
    }
  });

  test("only a route's first stage validates the request; later stages get the previous output", async () => {
    const ok = await post(`${server.url}/count`, { text: "a b  c" });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { count: 3 });
    assertError(await post(`${server.url}/count`, { text: "x".repeat(101) }), 422, /^request validation error: text: /);
  });

  test("recursive schemas validate at any depth", async () => {
    const tree = { label: "a", children: [{ label: "b", children: [{ label: "c", children: [] }] }] };
    const ok = await post(`${server.url}/depth`, { tree });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { depth: 3 });
    const bad = { label: "a", children: [{ label: "b", children: [{ label: 3, children: [] }] }] };
    assertError(await post(`${server.url}/depth`, { tree: bad }), 422, `${INVALID}: tree.children[0].children[0].label: expected string, received number`);
  });

  test("MessagePack bodies are validated after decoding, and errors are still JSON", async () => {
    const ok = await post(`${server.url}/packed`, new Uint8Array(pack({ values: [1, 2, 3.5] })));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(unpack(ok.body), { sum: 6.5 });
    assertError(await post(`${server.url}/packed`, new Uint8Array(pack({ values: [1, "2"] }))), 422, `${INVALID}: values[1]: expected number, received string`);
  });
});

describe("schemas at start-up", () => {
  test("a warm-up example that breaks the input schema stops the server, naming the field", async () => {
    const run = await runToExit(fixture("validation-warmup.ts"), ["--port", "0", "--address", "127.0.0.1"], { WARMUP: "input" });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /example 1 of 1 .*an example does not match the input schema: x: expected number, received string/);
  });

  test("a warm-up result that breaks the output schema stops the server, naming the field", async () => {
    const run = await runToExit(fixture("validation-warmup.ts"), ["--port", "0", "--address", "127.0.0.1"], { WARMUP: "output" });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /a result does not match the output schema: y: expected number, received string/);
  });

  test("--dry-run sends the parsed example through the pipeline", async () => {
    const run = await runToExit(fixture("validation-warmup.ts"), ["--dry-run"]);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /\/inference: Broken_1 .* => 200/);
  });
});
