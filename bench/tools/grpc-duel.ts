/**
 * The gRPC request path of two trees measured at the same moment, as bench/tools/duel.sh does for
 * REST: each tree's flood server (bench/scenarios/flood.ts's, the echo model) driven by its own
 * normal gRPC client (bench/tools/flood-client.ts: ModelInfer of 16 FP32 as raw contents, 8 calls
 * at once on one channel, a process of its own), both at once. Each round prints both trees'
 * requests and CPU µs per request (the server's whole process) and the ratios A/B.
 *
 *   node --import tsx bench/tools/grpc-duel.ts <treeA> <treeB> [rounds 3] [seconds 8]
 *
 * A tree is a checkout with node_modules and dist/ (bench/tools/checkout.sh makes one).
 */
import { join, resolve } from "node:path";
import { forkHelper } from "../lib/forked.js";
import { treeCpuSeconds } from "../lib/machine.js";
import { floodRepo, grpcClient, settingsOf, startFloodServer } from "../scenarios/flood.js";
import type { LoadResult } from "../../src/bench/loadgen.js";
const [a, b, rounds = "3", seconds = "8"] = process.argv.slice(2);
if (a === undefined || b === undefined) throw new Error("usage: grpc-duel.ts <treeA> <treeB> [rounds] [seconds]");
const trees = [a, b].map((t) => resolve(t));
const s = settingsOf({ values: {} });
const repo = floodRepo();
const servers = await Promise.all(trees.map((t) => startFloodServer(t, repo, s)));
const clients = await Promise.all(servers.map(({ grpcPort }) => forkHelper(process.cwd(), join(process.cwd(), "bench", "tools", "flood-client.ts"), grpcClient(grpcPort, 8))));
// Warm-up, both at once.
await new Promise((r) => setTimeout(r, 3000));
for (let round = 1; round <= Number(rounds); round++) {
  await Promise.all(clients.map((c) => c.ask("window")));
  const c0 = servers.map(({ server }) => treeCpuSeconds(server.pid));
  await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
  const res = await Promise.all(clients.map((c) => c.ask<LoadResult>("window")));
  const c1 = servers.map(({ server }) => treeCpuSeconds(server.pid));
  const line = res.map((r, i) => `${trees[i]}: ${r.requests} req, ${(((c1[i]! - c0[i]!) / r.requests) * 1e6).toFixed(1)} us/req`);
  const ratio = (res[0]!.requests / res[1]!.requests).toFixed(3);
  const cpu = ((c1[0]! - c0[0]!) / res[0]!.requests / ((c1[1]! - c0[1]!) / res[1]!.requests)).toFixed(3);
  console.log(`round ${round}: ${line.join(" | ")} | A/B req ${ratio}, CPU per request ${cpu}`);
}
await Promise.all(clients.map((c) => c.ask("stop")));
await Promise.all(servers.map(({ server }) => server.stop()));
repo.remove();
process.exit(0);
