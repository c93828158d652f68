/**
 * Keeps the comparison benchmarks from rotting: runs the Node side of each scenario (Shoal, and in
 * `model` its bare batching server; no Python peers, no PyPI) for about a second per point, with
 * small models, and checks the results it writes; the same on Bun for `echo` and `model` when Bun
 * is installed; and the before/after comparison (`--against`) with this tree on both sides.
 * Skipped when wrk is not installed. `grpc`, `generate` and `flood` bring their own clients and
 * always run.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { findBun } from "../bench/lib/runtimes.js";
import { modelsDir } from "../scripts/models/models-dir.js";
import { RAN_ONCE } from "./helpers.js";

const root = join(import.meta.dirname, "..");
const hasWrk = spawnSync("wrk", ["--version"]).error === undefined;
const results = mkdtempSync(join(tmpdir(), "shoal-bench-smoke-"));

// What each scenario needs to stay brief (a tiny model for `model`, 3 models for `multimodel`), and
// its Node servers: Shoal, and in `model` Shoal with MessagePack bodies and the bare batching server.
// `ocr` is left out: a request takes over half a second, too long for points of a second; and
// `python`: both its servers run Python from bench/.venv (PyPI).
const SCENARIOS: Record<string, { extra: string[]; servers: string[] }> = {
  echo: { extra: [], servers: ["shoal"] },
  model: { extra: ["--model", "tiny"], servers: ["shoal", "shoal-mp", "bare"] },
  pipeline: { extra: [], servers: ["shoal"] },
  multimodel: { extra: ["--models", "3"], servers: ["shoal"] },
  // The image example itself (EfficientNet-Lite0, made by `npm run models`) and the model's in-process limit.
  vision: { extra: [], servers: ["shoal"] },
};

// The Bun side of the scenarios that have one: Shoal on Bun, and in `model` the bare Bun.serve server.
const BUN_SCENARIOS: Record<string, { extra: string[]; servers: string[] }> = {
  echo: { extra: [], servers: ["shoal-bun"] },
  model: { extra: ["--model", "tiny"], servers: ["shoal-bun", "shoal-mp-bun", "bare-bun"] },
};
const bun = findBun(root);

after(() => rmSync(results, { recursive: true, force: true }));

interface SmokeResult {
  contenders: { name: string; runtime: string; unavailable?: string }[];
  cells: { server: string; connections: number; requestsPerSec: { median: number }; non2xx: number }[];
}

/** Runs a scenario briefly at 1 and 8 connections into `dir`; returns its JSON and what it printed. */
function runBrief(name: string, servers: string[], extra: string[], dir: string, env: Record<string, string> = {}): { data: SmokeResult; output: string } {
  const args = ["--import", "tsx", "bench/run.ts", name, "--servers", servers.join(","), "--duration", "1", "--rounds", "1", "--warmup", "1", "--connections", "1,8", "--quiet-wait", "0", "--results-dir", dir, ...extra];
  const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 120_000, env: { ...process.env, ...env } });
  const output = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, output);
  return { data: JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8")) as SmokeResult, output };
}

/** Every server answered at both loads, without an error answer, and the files were written. */
function checkMeasured(name: string, servers: string[], dir: string, data: SmokeResult): void {
  for (const file of [`${name}.json`, `${name}.md`, `${name}-throughput.svg`, `${name}-latency.svg`]) assert.ok(existsSync(join(dir, file)), `${file} written`);
  assert.deepEqual(
    data.cells.map((c) => [c.server, c.connections]),
    servers.flatMap((server) => [[server, 1], [server, 8]]),
  );
  for (const cell of data.cells) {
    assert.ok(cell.requestsPerSec.median > 0, `${name}: ${cell.server} answered at ${cell.connections} connections`);
    assert.equal(cell.non2xx, 0, `${name}: no error answers`);
  }
  assert.match(readFileSync(join(dir, `${name}-throughput.svg`), "utf8"), /^<svg[^>]*>[\s\S]*<polyline/);
}

describe("benchmark smoke test (Shoal side only)", { skip: RAN_ONCE ?? (hasWrk ? false : "wrk is not installed (apt-get install -y wrk): benchmark smoke test skipped") }, () => {
  for (const [name, { extra, servers }] of Object.entries(SCENARIOS)) {
    test(`npm run bench -- ${name} --servers ${servers.join(",")} writes its results`, () => {
      const { data } = runBrief(name, servers, extra, results);
      checkMeasured(name, servers, results, data);
      for (const c of data.contenders) assert.equal(c.runtime, "node", `${c.name} runs on Node`);
    });
  }

  describe("on Bun", { skip: bun.missing === undefined ? false : `${bun.missing}: the Bun contenders are not smoke-tested` }, () => {
    for (const [name, { extra, servers }] of Object.entries(BUN_SCENARIOS)) {
      test(`npm run bench -- ${name} --servers ${servers.join(",")} runs them on Bun and writes its results`, () => {
        const dir = join(results, "bun");
        const { data } = runBrief(name, servers, extra, dir);
        checkMeasured(name, servers, dir, data);
        for (const c of data.contenders) assert.equal(c.runtime, "bun", `${c.name} runs on Bun`);
        assert.match(readFileSync(join(dir, `${name}.md`), "utf8"), new RegExp(`\\| ${servers[0]} \\| bun ${bun.runtime!.version.replaceAll(".", "\\.")} \\| 1 \\|`));
      });
    }
  });

  // Without Bun the Bun contenders are reported, not measured, and the others run as usual.
  test("without Bun, npm run bench -- echo measures the Node servers and says why the Bun ones are not", () => {
    const dir = join(results, "no-bun");
    const { data, output } = runBrief("echo", ["shoal", "shoal-bun"], [], dir, { BENCH_BUN: join(results, "no-such-bun") });
    checkMeasured("echo", ["shoal"], dir, data);
    assert.match(data.contenders.find((c) => c.name === "shoal-bun")?.unavailable ?? "", /BENCH_BUN=.*no-such-bun does not run/);
    assert.match(output, /shoal-bun not measured: BENCH_BUN=/);
    assert.match(readFileSync(join(dir, "echo.md"), "utf8"), /\| shoal-bun \| bun \| – \| n\/a \|.*not measured: BENCH_BUN=/);
  });

  // A real model (npm run models -- minilm): where it has not been made and CI does not require it, say so.
  const minilm = existsSync(join(modelsDir(), "minilm", "onnx", "model.onnx")) || process.env.SHOAL_REQUIRE_MODELS ? false : "the minilm model is not made (npm run models -- minilm): the embeddings benchmark is not smoke-tested";
  test("npm run bench -- embeddings measures Shoal and the plain server on the real model", { skip: minilm }, () => {
    const dir = join(results, "embeddings");
    const { data } = runBrief("embeddings", ["shoal", "plain"], [], dir);
    checkMeasured("embeddings", ["shoal", "plain"], dir, data);
    const headline = (data as unknown as { headline: { what: string; value: number }[] }).headline;
    assert.ok(Number.isFinite(headline.find((h) => h.what === "Shoal / plain node:http texts/s at 8 connections")?.value), "the headline ratio is measured");
  });

  // The before/after comparison, with this tree as both sides (the other side needs only dist/,
  // node_modules and bench/.cache, which this tree has).
  test("npm run bench -- echo --against <dir> runs Shoal from both checkouts and compares them", () => {
    const dir = join(results, "against");
    const args = ["--import", "tsx", "bench/run.ts", "echo", "--servers", "shoal", "--against", ".", "--duration", "1", "--rounds", "2", "--warmup", "1", "--connections", "8", "--quiet-wait", "0", "--results-dir", dir];
    const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 120_000 });
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
    const data = JSON.parse(readFileSync(join(dir, "echo.json"), "utf8")) as { against?: { dir: string }; cells: { server: string; cpuUsPerRequest: number }[]; points: { server: string; round: number }[]; headline: { what: string; value: number }[] };
    assert.equal(data.against?.dir, root);
    assert.deepEqual(data.cells.map((c) => c.server), ["shoal", "shoal@before"]);
    for (const cell of data.cells) assert.ok(cell.cpuUsPerRequest > 0, `${cell.server}: CPU per request measured`);
    // Each round measures the two back to back, the first of them swapped between rounds.
    assert.deepEqual(data.points.map((p) => `${p.round} ${p.server}`), ["1 shoal", "1 shoal@before", "2 shoal@before", "2 shoal"]);
    for (const what of ["shoal: after / before req/s", "shoal: before / after server CPU per request"]) {
      assert.ok(Number.isFinite(data.headline.find((h) => h.what === what)?.value), `headline '${what}'`);
    }
    assert.match(readFileSync(join(dir, "echo.md"), "utf8"), /## Before and after[\s\S]*\| shoal \| 8 \|/);
  });
});

// The generate scenario has a streaming client of its own and needs no wrk.
test("npm run bench -- generate runs both batchings and writes its results", () => {
  const dir = join(results, "generate");
  const args = ["--import", "tsx", "bench/run.ts", "generate", "--model", "synthetic", "--connections", "1,4", "--max-tokens", "16", "--duration", "1", "--rounds", "1", "--warmup", "1", "--results-dir", dir];
  const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 120_000 });
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
  const data = JSON.parse(readFileSync(join(dir, "generate.json"), "utf8")) as { rows: { mode: string; connections: number; tokensPerSec: number; ttftP50: number; errors: number }[] };
  assert.deepEqual(
    data.rows.map((r) => `${r.mode} ${r.connections}`),
    ["continuous 1", "continuous 4", "request 1", "request 4"],
  );
  for (const row of data.rows) {
    assert.ok(row.tokensPerSec > 0 && row.ttftP50 > 0, `${row.mode} ${row.connections}: tokens streamed`);
    assert.equal(row.errors, 0);
  }
  for (const file of ["generate.md", "generate-tokens.svg", "generate-ttft.svg"]) assert.ok(existsSync(join(dir, file)), `${file} written`);
});

// The chat scenario serves the real SmolLM2 (npm run models -- smollm2) three ways, with the
// generate scenario's client; where the model is not made and CI does not require it, say so.
const smollm2 = existsSync(join(modelsDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")) || process.env.SHOAL_REQUIRE_MODELS ? false : "the smollm2 model is not made (npm run models -- smollm2): the chat benchmark is not smoke-tested";
test("npm run bench -- chat runs the three modes on SmolLM2 and writes its results", { skip: RAN_ONCE ?? smollm2 }, () => {
  const dir = join(results, "chat");
  const args = ["--import", "tsx", "bench/run.ts", "chat", "--connections", "2", "--min-tokens", "2", "--max-tokens", "4", "--duration", "2", "--rounds", "1", "--warmup", "1", "--results-dir", dir];
  const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 180_000 });
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
  const data = JSON.parse(readFileSync(join(dir, "chat.json"), "utf8")) as { rows: { mode: string; connections: number; tokensPerSec: number; ttftP50: number; itlP50: number; errors: number }[] };
  assert.deepEqual(data.rows.map((r) => `${r.mode} ${r.connections}`), ["continuous 2", "request 2", "one 2"]);
  for (const row of data.rows) {
    assert.ok(row.tokensPerSec > 0 && row.ttftP50 > 0 && Number.isFinite(row.itlP50), `${row.mode}: tokens streamed, their gaps measured`);
    assert.equal(row.errors, 0);
  }
  for (const file of ["chat.md", "chat-tokens.svg", "chat-ttft.svg"]) assert.ok(existsSync(join(dir, file)), `${file} written`);
});

// The gRPC scenario brings its own load generator: it needs no wrk.
describe("benchmark smoke test: grpc (Shoal side only)", { skip: RAN_ONCE ?? false }, () => {
  test("npm run bench -- grpc --servers shoal-json,shoal-binary,shoal-grpc writes its results", () => {
    const dir = mkdtempSync(join(tmpdir(), "shoal-bench-grpc-"));
    try {
      const args = ["--import", "tsx", "bench/run.ts", "grpc", "--servers", "shoal-json,shoal-binary,shoal-grpc", "--model", "tiny", "--duration", "1", "--warmup", "1", "--streams", "1,8", "--results-dir", dir];
      const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 120_000 });
      assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
      const data = JSON.parse(readFileSync(join(dir, "grpc.json"), "utf8")) as { cells: { server: string; streams: number; requestsPerSec: number; errors: number }[] };
      assert.deepEqual(
        data.cells.map((c) => [c.server, c.streams]),
        ["shoal-json", "shoal-binary", "shoal-grpc"].flatMap((server) => [[server, 1], [server, 8]]),
      );
      for (const cell of data.cells) {
        assert.ok(cell.requestsPerSec > 0, `${cell.server} answered at ${cell.streams} streams`);
        assert.equal(cell.errors, 0, `${cell.server}: no failed requests`);
      }
      assert.match(readFileSync(join(dir, "grpc.md"), "utf8"), /\| shoal-grpc \| 8 \|/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});


// The flood run with every attack at a handful of slots and short limits: it must measure both
// normal clients alone and under flood, and the REST port's limits must end what the attackers
// hold (an idle connection and slow headers by --headers-timeout, a gzip bomb by its size).
test("npm run bench -- flood runs every attack beside the normal clients and writes its results", () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-bench-flood-"));
  try {
    const sizes = ["--idle-rest", "8", "--slow-headers", "4", "--slow-bodies", "2", "--gzip-rest", "1", "--idle-grpc", "8", "--header-only", "1", "--streams-per-connection", "10", "--non-reading", "1", "--stream-requests", "10", "--stream-kb", "1", "--gzip-grpc", "1"];
    const limits = ["--max-connections", "64", "--headers-timeout", "500", "--request-timeout", "1000"];
    const args = ["--import", "tsx", "bench/run.ts", "flood", "--duration", "1", "--rounds", "1", "--warmup", "1", "--ramp", "1", "--connections", "2", "--streams", "2", ...limits, ...sizes, "--results-dir", dir];
    const run = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", timeout: 120_000 });
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
    const data = JSON.parse(readFileSync(join(dir, "flood.json"), "utf8")) as {
      windows: { round: number; phase: string; rest: { requests: number; errors: number }; grpc: { requests: number; errors: number }; attacks?: { name: string; opened: number; endedByServer: number; counts: Record<string, number> }[] }[];
      died?: unknown;
    };
    assert.equal(data.died, undefined, "the server stayed up");
    assert.deepEqual(data.windows.map((w) => `${w.round} ${w.phase}`), ["1 alone", "1 flood"]);
    for (const w of data.windows) {
      for (const client of ["rest", "grpc"] as const) {
        assert.ok(w[client].requests > 0, `${w.phase}: the normal ${client} client was answered`);
        assert.equal(w[client].errors, 0, `${w.phase}: the normal ${client} client saw no error`);
      }
    }
    const attacks = new Map(data.windows[1]!.attacks!.map((a) => [a.name, a]));
    assert.deepEqual([...attacks.keys()], ["idle-rest", "slow-headers", "slow-bodies", "gzip-rest", "idle-grpc", "header-only", "non-reading", "gzip-grpc"]);
    for (const a of attacks.values()) assert.ok(a.opened > 0, `${a.name} opened connections`);
    for (const name of ["idle-rest", "slow-headers"]) assert.ok(attacks.get(name)!.endedByServer > 0 && attacks.get(name)!.counts["408"]! > 0, `${name}: closed with a 408 after --headers-timeout`);
    assert.ok(attacks.get("gzip-rest")!.counts["413"]! > 0, "gzip-rest: a body that inflates past the limit gets 413");
    assert.ok(attacks.get("header-only")!.counts["calls opened"]! >= 10, "header-only: its calls were opened");
    assert.match(readFileSync(join(dir, "flood.md"), "utf8"), /server stayed up: yes/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
