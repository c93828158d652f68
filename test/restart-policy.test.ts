/** When a worker that died before it was ready is tried again, and when start-up gives up. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MAX_START_ATTEMPTS, restartDelayMs, startVerdict } from "../src/workers/restart-policy.js";

test("the back-off doubles from 100 ms and stops at 10 s", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8].map(restartDelayMs), [100, 200, 400, 800, 1600, 3200, 6400, 10_000]);
  assert.equal(restartDelayMs(1000), 10_000);
});

test("the user's code failing the same way twice in a row ends start-up, with its first line", () => {
  assert.equal(startVerdict({ attempt: 1, fatal: "no weights", previousFatal: undefined, exit: "exited with code 1" }), undefined);
  assert.equal(startVerdict({ attempt: 2, fatal: "no weights\n    at init", previousFatal: "no weights\n    at init", exit: "exited with code 1" }), "could not start: no weights");
});

test("a different error, or a death without one in between, is tried again", () => {
  assert.equal(startVerdict({ attempt: 2, fatal: "no device 1", previousFatal: "no device 0", exit: "exited with code 1" }), undefined);
  assert.equal(startVerdict({ attempt: 3, fatal: "no weights", previousFatal: undefined, exit: "exited with code 1" }), undefined);
});

test("a worker killed by a signal is not the code failing: it only uses up an attempt", () => {
  for (let attempt = 1; attempt < MAX_START_ATTEMPTS; attempt++) {
    assert.equal(startVerdict({ attempt, fatal: undefined, previousFatal: undefined, exit: "killed by signal SIGKILL" }), undefined);
  }
  assert.equal(MAX_START_ATTEMPTS, 5);
  assert.equal(startVerdict({ attempt: 5, fatal: undefined, previousFatal: undefined, exit: "killed by signal SIGKILL" }), "could not start in 5 attempts: killed by signal SIGKILL");
  assert.equal(startVerdict({ attempt: 5, fatal: "no device 4", previousFatal: "no device 3", exit: "exited with code 1" }), "could not start in 5 attempts: no device 4");
  assert.equal(startVerdict({ attempt: 5, fatal: undefined, previousFatal: undefined, exit: "uncaught Error: boom\n    at x" }), "could not start in 5 attempts: uncaught Error: boom");
});

test("a fatal error without a message is still the code failing; the exit says why", () => {
  assert.equal(startVerdict({ attempt: 2, fatal: "", previousFatal: "", exit: "exited with code 1" }), "could not start: exited with code 1");
});
