/** Configuration: flags, SHOAL_* variables, stage options, the port, and the life cycle. */
import assert from "node:assert/strict";
import { createServer, type Server as NetServer } from "node:net";
import { after, before, describe, test } from "node:test";
import { fixture, post, runToExit, startServer, waitForMetrics, type Exited } from "./helpers.js";

const BASIC = fixture("basic.ts");

// A configuration error is one line on stderr, without a stack trace.
function assertOneLineError(run: Exited, pattern: RegExp): void {
  const context = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
  assert.notEqual(run.code, 0, context);
  assert.notEqual(run.code, null, `killed instead of exiting: ${context}`);
  const lines = run.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line on stderr: ${context}`);
  assert.match(lines[0]!, pattern, context);
  assert.doesNotMatch(run.stderr, /^\s+at /m, `no stack trace: ${context}`);
}

describe("bad flags and variables", () => {
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ["--port abc", ["--port", "abc"], {}, /--port.*'abc'.*invalid/],
    ["--port 70000", ["--port", "70000"], {}, /--port.*'70000'.*invalid/],
    ["--timeout 0", ["--timeout", "0"], {}, /--timeout.*'0'.*invalid/],
    ["--capacity 1.5", ["--capacity", "1.5"], {}, /--capacity.*'1.5'.*invalid/],
    ["--log-level loud", ["--log-level", "loud"], {}, /--log-level.*'loud'.*invalid/],
    ["an unknown flag", ["--bogus", "1"], {}, /unknown option '--bogus'/],
    ["an extra argument", ["serve"], {}, /too many arguments/],
    ["SHOAL_TIMEOUT=-1", [], { SHOAL_TIMEOUT: "-1" }, /SHOAL_TIMEOUT.*invalid/],
    ["SHOAL_PORT=abc", [], { SHOAL_PORT: "abc" }, /SHOAL_PORT.*invalid/],
    ["SHOAL_LOG_FORMAT=xml", [], { SHOAL_LOG_FORMAT: "xml" }, /SHOAL_LOG_FORMAT.*invalid/],
    ["--access-log-sample 2", ["--access-log-sample", "2"], {}, /--access-log-sample.*'2'.*invalid/],
    ["SHOAL_ACCESS_LOG_SAMPLE=often", [], { SHOAL_ACCESS_LOG_SAMPLE: "often" }, /SHOAL_ACCESS_LOG_SAMPLE.*invalid/],
    ["--max-restarts 1.5", ["--max-restarts", "1.5"], {}, /--max-restarts.*'1.5'.*invalid/],
    ["SHOAL_RESTART_WINDOW=0", [], { SHOAL_RESTART_WINDOW: "0" }, /SHOAL_RESTART_WINDOW.*invalid/],
  ];
  for (const [name, args, env, pattern] of cases) {
    test(`${name}: non-zero exit with a one-line error`, async () => {
      const run = await runToExit(BASIC, ["--address", "127.0.0.1", ...args], env);
      assertOneLineError(run, pattern);
    });
  }
});

describe("invalid stage options", () => {
  const cases: [string, RegExp][] = [
    ["num0", /option 'num'/],
    ["negativeWait", /option 'maxWaitMs'/],
    ["fractionalBatch", /option 'maxBatchSize'/],
    ["unknownKey", /unknown option 'maxBatch'/],
    ["reservedRoute", /option 'route'.*reserved/],
    ["relativeRoute", /option 'route'.*starts with '\/'/],
    ["envCount", /option 'env' has 1 entries for num 2/],
    ["maxActivePlain", /options 'maxActive' and 'continuous' are for a StepWorker/],
    ["continuousPlain", /options 'maxActive' and 'continuous' are for a StepWorker/],
  ];
  for (const [name, pattern] of cases) {
    test(`${name}: non-zero exit, and stderr names the option`, async () => {
      const run = await runToExit(fixture("bad-options.ts"), ["--port", "0", "--address", "127.0.0.1"], { BAD_OPTION: name });
      assert.notEqual(run.code, 0, run.stderr);
      assert.notEqual(run.code, null, `killed instead of exiting: ${run.stderr}`);
      assert.match(run.stderr, /invalid stage Noop_1/);
      assert.match(run.stderr, pattern);
      assert.doesNotMatch(run.stdout, /listening on/);
    });
  }
});

describe("the port", () => {
  let holder: NetServer;
  let taken = 0;
  before(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    taken = (holder.address() as { port: number }).port;
  });
  after(() => {
    holder.close();
  });

  test("a port in use: non-zero exit with a clear one-line message", async () => {
    const run = await runToExit(BASIC, ["--port", String(taken), "--address", "127.0.0.1"]);
    assertOneLineError(run, new RegExp(`^shoal: 127\\.0\\.0\\.1:${taken} is already in use; choose another port with --port$`));
  });

  test("SHOAL_PORT is honoured: the taken port from the environment fails the same way", async () => {
    const run = await runToExit(BASIC, ["--address", "127.0.0.1"], { SHOAL_PORT: String(taken) });
    assertOneLineError(run, new RegExp(`127\\.0\\.0\\.1:${taken} is already in use`));
  });

  test("the --port flag beats SHOAL_PORT", async () => {
    const server = await startServer(BASIC, { env: { SHOAL_PORT: String(taken) } });
    try {
      assert.notEqual(server.port, taken);
      assert.equal((await post(`${server.url}/inference`, { x: 1 })).status, 200);
    } finally {
      await server.stop();
    }
  });
});

describe("SHOAL_* variables, and flags over them", () => {
  const env = { SHOAL_TIMEOUT: "1500", SHOAL_MAX_REQUEST_SIZE: "100" };
  const body = { pad: "p".repeat(200) };

  // How long after sending a request its deadline is.
  async function deadlineAfter(url: string): Promise<number> {
    const sent = Date.now();
    const reply = await post(`${url}/inference`, {});
    assert.equal(reply.status, 200, reply.text);
    return reply.json.deadline - sent;
  }

  test("SHOAL_TIMEOUT and SHOAL_MAX_REQUEST_SIZE are honoured", async () => {
    const server = await startServer(BASIC, { env });
    try {
      const left = await deadlineAfter(server.url);
      assert.ok(left > 800 && left <= 1700, `deadline ${left} ms after sending, for SHOAL_TIMEOUT 1500`);
      assert.equal((await post(`${server.url}/inference`, body)).status, 413);
    } finally {
      await server.stop();
    }
  });

  test("--timeout and --max-request-size beat them", async () => {
    const server = await startServer(BASIC, { env, args: ["--timeout", "2500", "--max-request-size", "1000"] });
    try {
      const left = await deadlineAfter(server.url);
      assert.ok(left > 1800 && left <= 2700, `deadline ${left} ms after sending, for --timeout 2500`);
      const reply = await post(`${server.url}/inference`, body);
      assert.equal(reply.status, 200, reply.text);
    } finally {
      await server.stop();
    }
  });
});

describe("life cycle", () => {
  test("SIGTERM lets the request in flight finish, then exits 0", async () => {
    const server = await startServer(BASIC);
    const inFlight = post(`${server.url}/inference`, { sleep: 800 });
    // Accepted and out of the queue: the worker has it (or has even answered it).
    await waitForMetrics(
      server.url,
      "the request to reach the worker",
      (read) => (read("shoal_requests_in_flight") ?? 0) + (read("shoal_requests_total", { route: "/inference" }) ?? 0) === 1 && read("shoal_stage_queue_depth", { stage: "Basic_1" }) === 0,
    );
    const code = await server.stop();
    const reply = await inFlight;
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json.echo, { sleep: 800 });
    assert.equal(code, 0, server.describe());
    const msgs = server.logs().map((l) => l.msg);
    assert.ok(msgs.includes("draining") && msgs.includes("stopped"), msgs.join(", "));
  });
});
