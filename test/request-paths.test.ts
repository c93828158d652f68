/**
 * The files a request runs through, measured with V8's coverage (bench/tools/path-files.ts), are
 * those docs/architecture.md counts: a file added to a path shows here, and its count in the doc
 * moves with it. The gRPC path touches no file of the HTTP door or of its dialects, and what runs
 * only when something fails stays off every path.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pathFiles, PATH_KINDS, type PathFiles } from "../bench/tools/path-files.js";
import { RAN_ONCE, ROOT } from "./helpers.js";

// The doc's table: the bold figures of a row, one per path (two-stage route, V2 REST, gRPC).
function documented(row: string): number[] {
  const doc = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
  const line = doc.split("\n").find((l) => l.startsWith(`| **${row}**`));
  assert.ok(line, `docs/architecture.md has the row '${row}'`);
  return [...line.matchAll(/\| \*\*(\d+)\*\* /g)].map((m) => Number(m[1]));
}

describe("request paths", { skip: RAN_ONCE }, () => {
  const measured = new Map<string, PathFiles>();

  test("each path's files, on the coordinator, in the workers and in all, are the doc's counts", { timeout: 300_000 }, async () => {
    for (const kind of PATH_KINDS) measured.set(kind, await pathFiles(kind, 50));
    const paths = PATH_KINDS.map((k) => measured.get(k)!);
    const describe = PATH_KINDS.map((k, i) => `${k}: ${paths[i]!.coordinator.join(" ")} | ${paths[i]!.worker.join(" ")}`).join("\n");
    assert.deepEqual(paths.map((p) => p.coordinator.length), documented("the coordinator"), describe);
    assert.deepEqual(paths.map((p) => p.worker.length), documented("the workers"), describe);
    assert.deepEqual(paths.map((p) => p.all), documented("in all"), describe);
  });

  test("a gRPC infer touches no HTTP file; failure handling is off every path", (t) => {
    if (measured.size === 0) return t.skip("the paths were not measured");
    const grpc = measured.get("grpc")!;
    assert.deepEqual(grpc.coordinator.filter((f) => f.startsWith("http/") || f.startsWith("apis/")), []);
    for (const [kind, files] of measured) {
      const all = [...files.coordinator, ...files.worker];
      for (const offPath of ["workers/restart-policy.ts", "workers/batch-split.ts", "http/cors.ts", "http/compression.ts"]) assert.ok(!all.includes(offPath), `${offPath} runs for a plain ${kind} request`);
    }
  });
});
