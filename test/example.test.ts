/** The README example, examples/calculate-exp.ts, started as users start it. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, assertError, post, runToExit, startServer, type ServerProcess } from "./helpers.js";

const EXAMPLE = join(ROOT, "examples", "calculate-exp.ts");

describe("examples/calculate-exp.ts", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(EXAMPLE);
  });
  after(async () => {
    await server?.stop();
  });

  test('POST /inference {"x": 2} answers {"y": e^2} as JSON', async () => {
    const reply = await post(`${server.url}/inference`, { x: 2 });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/json");
    assert.equal(reply.text, '{"y":7.38905609893065}');
    assert.ok(reply.headers.get("x-request-id"));
  });

  test("a body without 'x' is a 422 that names the key", async () => {
    const reply = await post(`${server.url}/inference`, { input: 2 });
    assertError(reply, 422, "request validation error: cannot find key 'x'");
    assert.equal(reply.text, `{"error":"request validation error: cannot find key 'x'"}`);
  });

  test("an 'x' that is not a number is a 422", async () => {
    const reply = await post(`${server.url}/inference`, { x: "two" });
    assertError(reply, 422, "request validation error: cannot convert 'x' value to float");
  });

  test("both workers of the stage answer concurrent requests correctly", async () => {
    const xs = Array.from({ length: 20 }, (_, i) => i / 4);
    const replies = await Promise.all(xs.map((x) => post(`${server.url}/inference`, { x })));
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      // Within an ulp: the server may run on another engine, whose Math.exp rounds its own way.
      const y = (reply.json as { y: number }).y;
      assert.ok(Math.abs(y - Math.exp(xs[i]!)) <= Math.exp(xs[i]!) * Number.EPSILON, `${y} for exp(${xs[i]})`);
    }
  });

  test("it logged its stage and route on start-up", () => {
    const listening = server.logs().find((l) => l.msg?.startsWith("listening on"));
    assert.deepEqual(listening?.routes, { "/inference": ["CalculateExp_1"] });
    assert.deepEqual(listening?.stages, [{ name: "CalculateExp_1", num: 2, maxBatchSize: 1, maxWaitMs: 10 }]);
  });
});

test("--help lists every flag with its default and environment variable, and exits 0", async () => {
  const { code, stdout, stderr } = await runToExit(EXAMPLE, ["--help"]);
  assert.equal(code, 0, stderr);
  // Each option's entry starts on a line of its own and may wrap onto the next lines; the
  // whitespace is folded before comparing.
  const entries = new Map<string, string>();
  let current: string | undefined;
  for (const line of stdout.split("\n")) {
    const start = /^ {2}(-h, )?(--[a-z-]+)/.exec(line);
    if (start) {
      current = start[2]!;
      entries.set(current, line);
    } else if (current !== undefined && /^\s+\S/.test(line)) {
      entries.set(current, `${entries.get(current)} ${line}`);
    } else {
      current = undefined;
    }
  }
  for (const [flag, entry] of entries) entries.set(flag, entry.replace(/\s+/g, " "));
  const core: [string, string][] = [
    ["--port", "default: 8000"],
    ["--address", 'default: "0.0.0.0"'],
    ["--timeout", "default: 3000"],
    ["--capacity", "default: 1024"],
    ["--max-request-size", "default: 10485760"],
    ["--log-level", 'default: "info"'],
    // Not a terminal here, so the default format is JSON.
    ["--log-format", 'default: "json"'],
  ];
  for (const [flag, dflt] of core) {
    assert.ok(entries.has(flag), `--help does not list ${flag}:\n${stdout}`);
    assert.ok(entries.get(flag)!.includes(dflt), `${flag} does not show ${dflt}: ${entries.get(flag)}`);
  }
  assert.ok(entries.has("--help"), stdout);
  // Every flag, those added later included, shows its default (unless it is off when absent)
  // and its SHOAL_* variable.
  const noDefault = new Set(["--help", "--model-repository", "--admin-token", "--admin-token-file", "--tenant-key"]);
  for (const [flag, entry] of entries) {
    if (flag === "--help") continue;
    const env = `SHOAL_${flag.slice(2).replace(/-/g, "_").toUpperCase()}`;
    if (!noDefault.has(flag)) assert.match(entry, /\(.*default: [^,)]+/, `${flag} does not show its default: ${entry}`);
    assert.ok(entry.includes(`env: ${env}`), `${flag} does not name ${env}: ${entry}`);
  }
});
