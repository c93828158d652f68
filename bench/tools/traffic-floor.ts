/**
 * How much of the model scenario's in-process limit any server could keep on this machine.
 *
 * The limit (bench/servers/onnx-limit.mjs) is measured alone, then again while a null server
 * (bench/servers/null-model.mjs: it reads each body and answers a fixed model-sized answer, and
 * does nothing else) takes wrk's load at 64 connections, paced to the rate a goal asks for: a
 * share of the limit. The server, wrk and the kernel then share the two cores with the model. What
 * the model still does under that traffic bounds what a real server can reach, since a real one
 * does all that and parses, batches and posts to its workers besides: if the model keeps fewer
 * samples per second than the paced rate, no server reaches that share here.
 *
 *   node --import tsx bench/tools/traffic-floor.ts [--runtime bun|node] [--seconds 6] [--shares 0.85,0.9] [--rounds 3]
 *
 * Needs the model scenario's cached files (bench/.cache/mlp-big.onnx, model-big-request.msgpack):
 * run `npm run bench -- model` once first.
 */
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { findBun } from "../lib/runtimes.js";
import { runWrk } from "../lib/wrk.js";
import { row } from "../scenarios/model.js";

const root = join(import.meta.dirname, "..", "..");
const { values } = parseArgs({ options: { runtime: { type: "string", default: "bun" }, seconds: { type: "string", default: "6" }, shares: { type: "string", default: "0.85,0.9" }, rounds: { type: "string", default: "3" } } });
const seconds = Number(values.seconds);
const cache = join(root, "bench", ".cache");
const model = join(cache, "mlp-big.onnx");
const msgpackBody = join(cache, "model-big-request.msgpack");
for (const file of [model, msgpackBody]) if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run bench -- model\` once first`);
const jsonBody = join(cache, "model-big-request.json");
writeFileSync(jsonBody, JSON.stringify({ input: [row(1024)] }));
const runtime = values.runtime === "bun" ? findBun(root).runtime?.program : process.execPath;
if (runtime === undefined) throw new Error(findBun(root).missing);

// The limit's samples per second, from its one JSON line.
async function limit(): Promise<number> {
  const child = spawn(process.execPath, [join(root, "bench", "servers", "onnx-limit.mjs"), "--model", model, "--batch", "32", "--sessions", "2", "--threads", "1", "--seconds", String(seconds)], { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  await new Promise((resolve) => child.on("close", resolve));
  return (JSON.parse(out) as { samplesPerSec: number }).samplesPerSec;
}

const port = 9400 + Math.floor(Math.random() * 500);
const formats = [
  { format: "json", body: jsonBody, type: "application/json", port },
  { format: "msgpack", body: msgpackBody, type: "application/msgpack", port: port + 1 },
] as const;
const servers = formats.map((f) => spawn(runtime, [join(root, "bench", "servers", "null-model.mjs"), String(f.port), f.format], { cwd: root, stdio: ["ignore", "pipe", "inherit"] }));
await Promise.all(servers.map((server) => new Promise((resolve) => server.stdout!.once("data", resolve))));
const shares = values.shares!.split(",").map(Number);
const rows = new Map<string, { served: number; under: number; alone: number }[]>();
for (let round = 1; round <= Number(values.rounds); round++) {
  // The limit moves by a few per cent between runs here: each round measures it afresh.
  const alone = await limit();
  process.stdout.write(`round ${round}: the limit alone ${alone.toFixed(0)} samples/s\n`);
  for (const f of formats) {
    for (const share of shares) {
      // 64 connections, each waiting before each request: 64 / (delay + its round trip) req/s. The
      // round trip is read from a short run first; wrk's delays are whole milliseconds.
      const paced = (delayMs: number, durationSec: number) => runWrk({ url: `http://127.0.0.1:${f.port}/`, connections: 64, durationSec, script: join(root, "bench", "lua", "post-file.lua"), env: { WRK_BODY_FILE: f.body, WRK_CONTENT_TYPE: f.type, WRK_DELAY_MS: String(delayMs) } });
      const first = Math.round(64_000 / (share * alone));
      const roundTripMs = Math.max(0, 64_000 / (await paced(first, 2)).requestsPerSec - first);
      const load = paced(Math.max(0, Math.round(64_000 / (share * alone) - roundTripMs)), seconds + 4);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const under = await limit();
      const served = (await load).requestsPerSec;
      process.stdout.write(`  ${f.format}, paced at ${(share * 100).toFixed(0)} %: ${served.toFixed(0)} req/s; the limit under it ${under.toFixed(0)} samples/s (${((under / alone) * 100).toFixed(1)} %)\n`);
      const key = `${f.format} ${share}`;
      rows.set(key, [...(rows.get(key) ?? []), { served, under, alone }]);
    }
  }
}
for (const server of servers) server.kill();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
process.stdout.write("\n| body | paced at (share of the limit alone) | served (req/s) | the limit under it, of the limit alone (median, range) |\n|---|--:|--:|--:|\n");
for (const [key, runs] of rows) {
  const [format, share] = key.split(" ");
  const kept = runs.map((r) => r.under / r.alone);
  process.stdout.write(`| ${format} | ${(Number(share) * 100).toFixed(0)} % | ${median(runs.map((r) => r.served)).toFixed(0)} | ${(median(kept) * 100).toFixed(1)} % (${(Math.min(...kept) * 100).toFixed(1)}–${(Math.max(...kept) * 100).toFixed(1)}) |\n`);
}
