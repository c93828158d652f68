/**
 * The front's ledger of accepted tasks (src/serving/ledger.ts): what it holds as tasks come and
 * go, and that a task it has let go is not kept alive by it through minor collections (a `Set`
 * was: its abandoned tables held the tasks, and under load every request was promoted).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ShoalError } from "../src/errors.js";
import type { Reply } from "../src/scheduling/task.js";
import { Task } from "../src/scheduling/task.js";
import { Ledger } from "../src/serving/ledger.js";

const reply: Reply = { send() {}, fail() {}, chunk() {}, end() {}, release() {} };

const meta = { requestId: "r", headers: {}, deadline: 0, route: "/r" };

function task(payload: unknown = undefined): Task {
  return new Task([], meta, 0, payload, undefined, reply);
}

describe("Ledger", () => {
  test("holds what was added until it is deleted, in any order", () => {
    const ledger = new Ledger<Task>();
    const [a, b, c, d] = [task(), task(), task(), task()];
    for (const t of [a, b, c, d]) ledger.add(t);
    assert.equal(ledger.size, 4);
    ledger.delete(b);
    ledger.delete(a);
    assert.equal(ledger.size, 2);
    assert.deepEqual(new Set(ledger.list()), new Set([c, d]));
    ledger.delete(d);
    ledger.delete(c);
    assert.equal(ledger.size, 0);
    assert.deepEqual(ledger.list(), []);
  });

  test("deleting a task it does not hold, or one deleted already, changes nothing", () => {
    const ledger = new Ledger<Task>();
    const [a, b] = [task(), task()];
    ledger.add(a);
    ledger.delete(b);
    ledger.delete(a);
    ledger.delete(a);
    assert.equal(ledger.size, 0);
    ledger.add(b);
    assert.deepEqual(ledger.list(), [b]);
  });

  test("list() is a copy: failing each task, which takes it out, still reaches every one", () => {
    const ledger = new Ledger<Task>();
    const failed: number[] = [];
    // Each task's release() takes it out of the ledger, as the front's does.
    const tasks = Array.from({ length: 5 }, (_, i) => {
      const t: Task = new Task([], meta, 0, undefined, undefined, { ...reply, fail: () => failed.push(i), release: () => ledger.delete(t) });
      return t;
    });
    for (const t of tasks) ledger.add(t);
    for (const t of ledger.list()) t.fail(new ShoalError("SHUTTING_DOWN", "the server is shutting down"));
    assert.deepEqual(failed.sort(), [0, 1, 2, 3, 4]);
    assert.equal(ledger.size, 0);
  });
});

// V8's collector, taken as src/app/idle-gc.ts takes it. Bun's collector is another one.
function v8Gc(): ((options?: { type: "minor" | "major" }) => void) | undefined {
  if ("Bun" in globalThis) return undefined;
  setFlagsFromString("--expose-gc");
  try {
    return runInNewContext("gc") as (options?: { type: "minor" | "major" }) => void;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

const oldSpaceUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === "old_space")!.space_used_size;

test("a task let go is not kept alive through minor collections once the ledger is old", { skip: "Bun" in globalThis && "V8 only" }, () => {
  const gc = v8Gc()!;
  const ledger = new Ledger<Task>();
  const live: Task[] = [];
  const churn = (n: number) => {
    for (let i = 0; i < n; i++) {
      // 4 KB of its own per task, as a request's graph is some kilobytes.
      const t = task(new Array(512).fill(i + 0.5));
      ledger.add(t);
      live.push(t);
      if (live.length > 64) ledger.delete(live.shift()!);
      if (i % 500 === 499) gc({ type: "minor" });
    }
  };
  churn(1000);
  // A full collection moves the ledger's storage to the old generation, as one does under load.
  gc({ type: "major" });
  const before = oldSpaceUsed();
  churn(4000);
  const grown = oldSpaceUsed() - before;
  // The 64 tasks still held may be promoted (256 KiB); with a Set, 3 to 16 MiB of the 16 MiB let
  // go were (Node 20, Node 24).
  assert.ok(grown < 1024 * 1024, `the old generation grew by ${(grown / 1048576).toFixed(1)} MiB over 4000 tasks let go`);
});
