/** Type-level tests: test/types/*.ts must compile against the built package, expected errors included. */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT } from "./helpers.js";

test("typed() and typedBatch() reject forward() signatures and examples that break their schemas", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const run = spawnSync(process.execPath, [tsc, "-p", join(ROOT, "test", "types", "tsconfig.json")], { cwd: ROOT, encoding: "utf8" });
  assert.equal(run.status, 0, `tsc found errors (or an @ts-expect-error line that is no error):\n${run.stdout}${run.stderr}`);
});
