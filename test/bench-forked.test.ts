/**
 * bench/lib/forked.ts, the benchmarks' helper processes over IPC (the flood run's normal clients
 * and attackers): answers come back in the order of the questions even when an earlier one takes
 * longer, "stop" ends the child after its answer, and a child that exits leaves no question
 * hanging.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { forkHelper } from "../bench/lib/forked.js";
import { fixture, processAlive, ROOT } from "./helpers.js";

const script = fixture("forked-answers.ts");

test("a helper process answers each question once, in order, and exits after stop", async () => {
  const child = await forkHelper(ROOT, script, { delays: [300, 0, 100] });
  assert.ok(processAlive(child.pid));
  const answers = await Promise.all([child.ask({ a: 1 }), child.ask("two"), child.ask([3])]);
  assert.deepEqual(answers, [{ question: { a: 1 }, n: 0 }, { question: "two", n: 1 }, { question: [3], n: 2 }]);
  assert.deepEqual(await child.ask("stop"), { question: "stop", n: 3 });
  for (let i = 0; i < 100 && processAlive(child.pid); i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(processAlive(child.pid), false, "the child exited after answering stop");
});

test("questions still open when the child exits are rejected with its exit code", async () => {
  const child = await forkHelper(ROOT, script, { delays: [] });
  const pending = child.ask("die");
  await assert.rejects(pending, /exited \(3\) before it answered/);
  await assert.rejects(child.ask("after"), /exited|channel closed|ERR_IPC/i);
});
