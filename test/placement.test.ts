/**
 * The shared pool's pure decisions, with made-up pools and a made-up clock: where replicas go,
 * which free worker serves a model, and which idle models leave to make room.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { makeRoom, pickWorker, placeReplicas } from "../src/models/placement.js";

describe("placeReplicas", () => {
  const load = (workerId: number, bytes: number, models: number) => ({ workerId, bytes, models });

  test("the workers holding the fewest bytes come first, then the fewest models", () => {
    const candidates = [load(1, 500, 1), load(2, 100, 3), load(3, 100, 1), load(4, 0, 0)];
    assert.deepEqual(placeReplicas(candidates, 4), [4, 3, 2, 1]);
    assert.deepEqual(placeReplicas(candidates, 2), [4, 3]);
  });

  test("ties keep the candidates' order", () => {
    assert.deepEqual(placeReplicas([load(3, 0, 0), load(1, 0, 0), load(2, 0, 0)], 2), [3, 1]);
  });

  test("asks for no more than wanted, and none when nothing is wanted", () => {
    const candidates = [load(1, 0, 0), load(2, 0, 0)];
    assert.deepEqual(placeReplicas(candidates, 5), [1, 2]);
    assert.deepEqual(placeReplicas(candidates, 0), []);
    assert.deepEqual(placeReplicas(candidates, -1), []);
    assert.deepEqual(placeReplicas([], 3), []);
  });

  test("leaves the candidates as they were", () => {
    const candidates = [load(1, 9, 0), load(2, 1, 0)];
    placeReplicas(candidates, 2);
    assert.deepEqual(candidates.map((c) => c.workerId), [1, 2]);
  });
});

describe("pickWorker", () => {
  test("takes the free holder whose other models have the fewest requests waiting", () => {
    const waiting = new Map([
      [1, 5],
      [2, 0],
      [3, 2],
    ]);
    assert.equal(pickWorker([1, 2, 3], (w) => [1, 2, 3].includes(w), (w) => waiting.get(w)!), 2);
    assert.equal(pickWorker([1, 2, 3], (w) => w === 1 || w === 3, (w) => waiting.get(w)!), 3);
  });

  test("a holder that is busy is never taken; none free is undefined", () => {
    assert.equal(pickWorker([1, 2], (w) => w >= 3, () => 0), undefined);
    assert.equal(pickWorker([], () => true, () => 0), undefined);
  });

  test("on a tie the first holder wins", () => {
    assert.equal(pickWorker([2, 1], () => true, () => 0), 2);
  });
});

describe("makeRoom", () => {
  // A clock the test sets: when each model was last used.
  const model = (name: string, bytes: number, lastUsed: number) => ({ model: name, bytes, lastUsed });

  test("nothing is evicted when the model fits", () => {
    assert.deepEqual(makeRoom(50, 50, 100, [model("a", 10, 0)]), { evict: [], fits: true });
  });

  test("evicts the least recently used idle models, one at a time, until it fits", () => {
    const idle = [model("recent", 40, 300), model("oldest", 30, 100), model("older", 30, 200)];
    assert.deepEqual(makeRoom(100, 30, 100, idle), { evict: ["oldest"], fits: true });
    assert.deepEqual(makeRoom(100, 60, 100, idle), { evict: ["oldest", "older"], fits: true });
    assert.deepEqual(makeRoom(100, 100, 100, idle), { evict: ["oldest", "older", "recent"], fits: true });
  });

  test("a model that cannot fit even with every idle one gone does not fit, and the idle ones are evicted", () => {
    assert.deepEqual(makeRoom(100, 80, 100, [model("a", 10, 1), model("b", 20, 2)]), { evict: ["a", "b"], fits: false });
  });

  test("with no idle model, it fits only if there is room", () => {
    assert.deepEqual(makeRoom(90, 20, 100, []), { evict: [], fits: false });
    assert.deepEqual(makeRoom(80, 20, 100, []), { evict: [], fits: true });
  });

  test("an unlimited budget always fits", () => {
    assert.deepEqual(makeRoom(1e12, 1e12, Infinity, [model("a", 1, 1)]), { evict: [], fits: true });
  });

  test("a model held by several workers frees its bytes on each", () => {
    // `bytes` is its cost times its replicas: one eviction of 2 × 30 makes room for 50.
    assert.deepEqual(makeRoom(100, 50, 100, [model("twice", 60, 1), model("once", 30, 2)]), { evict: ["twice"], fits: true });
  });
});
