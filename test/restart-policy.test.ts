/** When a worker that died is tried again, when start-up gives up, and when restarts make the server unhealthy. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MAX_START_ATTEMPTS, RestartLimit, restartDelayMs, signalExit, SlotBackoff, STABLE_AFTER_BATCHES, STABLE_AFTER_MS, startVerdict } from "../src/workers/restart-policy.js";

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

/** A clock the test moves by hand. */
function fakeClock(): { now: () => number; advance(ms: number): void } {
  let t = 1000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

describe("a worker slot's back-off", () => {
  test("a worker that never gets ready backs off from the first death, doubling", () => {
    const backoff = new SlotBackoff(fakeClock().now);
    assert.deepEqual([1, 2, 3, 4].map(() => backoff.died("exited with code 1", true)), [100, 200, 400, 800]);
    assert.equal(backoff.failures, 4);
  });

  test("one that served is replaced at once the first time; dying again soon after ready backs off", () => {
    const clock = fakeClock();
    const backoff = new SlotBackoff(clock.now);
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      backoff.ready();
      clock.advance(50);
      delays.push(backoff.died("exited with code 3", false));
    }
    assert.deepEqual(delays, [0, 200, 400, 800]);
  });

  test("a kill by a signal is replaced at once and does not count", () => {
    const backoff = new SlotBackoff(fakeClock().now);
    backoff.died("exited with code 1", true);
    backoff.died("exited with code 1", true);
    for (let i = 0; i < 10; i++) assert.equal(backoff.died(signalExit("SIGKILL"), false), 0);
    assert.equal(backoff.died(signalExit("SIGTERM"), false), 0);
    assert.equal(backoff.failures, 2);
    assert.equal(backoff.died("exited with code 1", true), 400, "the next failure goes on from where the slot was");
  });

  test("a signal with a fatal error from the user's code counts", () => {
    const backoff = new SlotBackoff(fakeClock().now);
    assert.equal(backoff.died(signalExit("SIGABRT"), true), 100);
    assert.equal(backoff.failures, 1);
  });

  test(`it starts over once a worker was ready ${STABLE_AFTER_MS} ms`, () => {
    const clock = fakeClock();
    const backoff = new SlotBackoff(clock.now);
    for (let i = 0; i < 6; i++) backoff.died("exited with code 1", true);
    backoff.ready();
    clock.advance(STABLE_AFTER_MS - 1);
    assert.equal(backoff.died("exited with code 3", false), restartDelayMs(7), "not yet");
    backoff.ready();
    clock.advance(STABLE_AFTER_MS);
    assert.equal(backoff.died("exited with code 3", false), 0);
    assert.equal(backoff.failures, 1);
  });

  test(`it starts over once a worker answered ${STABLE_AFTER_BATCHES} batches`, () => {
    const clock = fakeClock();
    const backoff = new SlotBackoff(clock.now);
    for (let i = 0; i < 6; i++) backoff.died("exited with code 1", true);
    backoff.ready();
    assert.equal(backoff.died("exited with code 3", false, STABLE_AFTER_BATCHES - 1), restartDelayMs(7), "not yet");
    backoff.ready();
    assert.equal(backoff.died("exited with code 3", false, STABLE_AFTER_BATCHES), 0);
    backoff.ready();
    assert.equal(backoff.died("exited with code 3", false), 200, "the batches are those of the worker that died");
  });

  test("a kill after a worker served a while still starts the slot over", () => {
    const clock = fakeClock();
    const backoff = new SlotBackoff(clock.now);
    for (let i = 0; i < 3; i++) backoff.died("exited with code 1", true);
    backoff.ready();
    clock.advance(STABLE_AFTER_MS);
    assert.equal(backoff.died(signalExit("SIGKILL"), false), 0);
    assert.equal(backoff.failures, 0);
  });
});

describe("--max-restarts within --restart-window", () => {
  test("more than max restarts within the window make the server unhealthy, for good", () => {
    const clock = fakeClock();
    const limit = new RestartLimit(3, 10_000, clock.now);
    for (let i = 0; i < 3; i++) {
      limit.record();
      clock.advance(3000);
    }
    assert.equal(limit.exceeded, undefined, "3 restarts are allowed");
    limit.record();
    assert.equal(limit.exceeded, "4 worker restarts within 10000 ms (--max-restarts 3)");
    clock.advance(60_000);
    assert.equal(limit.exceeded, "4 worker restarts within 10000 ms (--max-restarts 3)");
  });

  test("restarts spread wider than the window do not", () => {
    const clock = fakeClock();
    const limit = new RestartLimit(2, 10_000, clock.now);
    for (let i = 0; i < 20; i++) {
      limit.record();
      clock.advance(5001);
    }
    assert.equal(limit.exceeded, undefined);
  });

  test("0 turns the limit off", () => {
    const limit = new RestartLimit(0, 10_000, fakeClock().now);
    for (let i = 0; i < 1000; i++) limit.record();
    assert.equal(limit.exceeded, undefined);
  });
});
