/**
 * Shoal from compiled JavaScript: a server module in plain JavaScript runs with `node` alone, no
 * TypeScript loader, and its workers find their class the same way.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ROOT, fixture, post, runtimeCommand, startCommand } from "./helpers.js";

test("a plain JavaScript server runs under node without a loader", async () => {
  const [command, args] = runtimeCommand(fixture("plain.mjs"), ["--port", "0", "--address", "127.0.0.1"]);
  const { proc, port } = await startCommand(command, args, ROOT, 20_000);
  try {
    const replies = await Promise.all([1, 2, 3, 4, 5, 6].map((x) => post(`http://127.0.0.1:${port}/inference`, { x })));
    assert.deepEqual(replies.map((r) => r.json.y), [2, 4, 6, 8, 10, 12]);
    assert.deepEqual([...new Set(replies.map((r) => r.status))], [200]);
  } finally {
    proc.kill("SIGTERM");
  }
});
