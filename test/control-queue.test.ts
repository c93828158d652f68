/** The per-model queue of control operations, and the deadline of a control request. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ControlQueue, withDeadline } from "../src/models/control-queue.js";
import { ShoalError } from "../src/errors.js";

/** An operation that records when it starts and ends when told to. */
class Gate {
  started = false;
  #open!: () => void;
  #fail!: (err: Error) => void;
  readonly run = (): Promise<void> => {
    this.started = true;
    return new Promise((resolve, reject) => [this.#open, this.#fail] = [resolve, reject]);
  };
  open(): void {
    this.#open();
  }
  fail(err: Error): void {
    this.#fail(err);
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("the control queue", () => {
  test("a load while a load is under way joins it: one run, both get its outcome", async () => {
    const queue = new ControlQueue();
    const first = new Gate();
    let second = 0;
    const a = queue.run("m", "load", first.run);
    const b = queue.run("m", "load", async () => void second++);
    assert.equal(a, b);
    await tick();
    assert.ok(first.started);
    first.fail(new ShoalError("SERVER", "boom"));
    await assert.rejects(a, /boom/);
    await assert.rejects(b, /boom/);
    assert.equal(second, 0);
    assert.deepEqual(queue.queued("m"), []);
  });

  test("an unload waits for the load under way, whatever its outcome, and then runs", async () => {
    const queue = new ControlQueue();
    const load = new Gate();
    const unload = new Gate();
    const loaded = queue.run("m", "load", load.run);
    const unloaded = queue.run("m", "unload", unload.run);
    await tick();
    assert.ok(load.started);
    assert.equal(unload.started, false);
    assert.deepEqual(queue.queued("m"), ["load", "unload"]);
    load.fail(new Error("no"));
    await assert.rejects(loaded, /no/);
    await tick();
    assert.ok(unload.started);
    unload.open();
    await unloaded;
    assert.deepEqual(queue.queued("m"), []);
  });

  test("an operation joins the last one queued, not one of its kind further ahead", async () => {
    const queue = new ControlQueue();
    const gates = [new Gate(), new Gate(), new Gate()];
    const load = queue.run("m", "load", gates[0]!.run);
    const unload = queue.run("m", "unload", gates[1]!.run);
    const reload = queue.run("m", "load", gates[2]!.run);
    assert.notEqual(reload, load);
    assert.equal(queue.run("m", "load", async () => {}), reload);
    for (const gate of gates) {
      await tick();
      assert.ok(gate.started);
      gate.open();
    }
    await Promise.all([load, unload, reload]);
  });

  test("one more operation than the depth that cannot join is refused with 409, and the others go on", async () => {
    const queue = new ControlQueue(3);
    const gates = [new Gate(), new Gate(), new Gate()];
    const queued = [queue.run("m", "load", gates[0]!.run), queue.run("m", "unload", gates[1]!.run), queue.run("m", "load", gates[2]!.run)];
    await assert.rejects(queue.run("m", "unload", async () => {}), (err: ShoalError) => {
      assert.equal(err.status, 409);
      assert.equal(err.publicMessage, "conflict: model 'm' has load, then unload, then load under way; send the unload again once they are answered");
      return true;
    });
    for (const gate of gates) {
      await tick();
      gate.open();
    }
    await Promise.all(queued);
  });

  test("models do not wait for each other", async () => {
    const queue = new ControlQueue();
    const slow = new Gate();
    const a = queue.run("a", "load", slow.run);
    let ran = false;
    await queue.run("b", "load", async () => void (ran = true));
    assert.ok(ran);
    slow.open();
    await a;
  });

  test("an operation that throws at once settles and frees the queue", async () => {
    const queue = new ControlQueue();
    await assert.rejects(queue.run("m", "unload", () => {
      throw new ShoalError("NOT_FOUND", "model 'm' is not loaded");
    }), /not loaded/);
    await tick();
    assert.deepEqual(queue.queued("m"), []);
  });
});

describe("a control request's deadline", () => {
  test("rejects with the late error when the work is slower, and the work goes on", async () => {
    const work = new Gate();
    const started = performance.now();
    await assert.rejects(withDeadline(work.run(), 30, () => new ShoalError("NOT_READY", "still loading")), (err: ShoalError) => err.status === 503);
    assert.ok(performance.now() - started < 1000);
    work.open();
  });

  test("settles as the work does when it is in time", async () => {
    assert.equal(await withDeadline(Promise.resolve(7), 60_000, () => new ShoalError("NOT_READY")), 7);
    await assert.rejects(withDeadline(Promise.reject(new Error("bad")), 60_000, () => new ShoalError("NOT_READY")), /bad/);
  });
});
