/**
 * What the flood's attacks cost the server, without normal clients: the CPU of its main thread
 * and of its whole process, in cores and per event the attack makes it handle (a connection or
 * call it ends, an answer it gives), each attack alone and then all at once. With several trees
 * (`--trees`, each a checkout with its dist/ built, bench/tools/checkout.sh), each gets its own
 * server and attackers, measured at the same moment, so that a busy machine slows them alike.
 * The attack sizes and the server's limits are the flood scenario's for the same flags
 * (bench/scenarios/flood.ts): what is measured is what the flood adds to a server's work.
 *
 *   node --import tsx bench/tools/attack-cost.ts [--seconds 8] [--each] [--trees .,/tmp/base] [--profile DIR] [flood flags, e.g. --attacks grpc]
 *
 * --profile writes a .cpuprofile of each server (bench/tools/cpuprofile-top.ts summarises it).
 */
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { ATTACKS, startAttacks, type AttackName } from "../lib/attacks.js";
import { threadCpuTimes } from "../lib/machine.js";
import { floodRepo, scenario, settingsOf, startFloodServer } from "../scenarios/flood.js";

const { values } = parseArgs({
  options: { seconds: { type: "string", default: "8" }, each: { type: "boolean", default: false }, trees: { type: "string", default: "." }, profile: { type: "string" }, ...scenario.options },
  strict: true,
});
const secs = Number(values.seconds);
const RAMP_MS = 3000;
const settings = settingsOf({ values });
const trees = values.trees!.split(",").map((t) => resolve(t));
const chosen = ATTACKS.filter((n) => settings.attack.sizes[n] > 0);
const runs: AttackName[][] = values.each ? [...chosen.map((n) => [n]), chosen] : [chosen];

// CPU seconds so far of the main thread and of every thread of `pid`.
function cpu(pid: number): { main: number; all: number } {
  const times = threadCpuTimes(pid);
  return { main: times.get(pid) ?? 0, all: [...times.values()].reduce((a, b) => a + b, 0) };
}

const repo = floodRepo();
try {
  for (const names of runs) {
    const before = values.profile === undefined ? undefined : [`--cpu-prof`, `--cpu-prof-dir=${resolve(values.profile)}`];
    const servers = await Promise.all(trees.map((root) => startFloodServer(root, repo, settings, before === undefined ? {} : { program: process.execPath, before })));
    const sizes = Object.fromEntries(ATTACKS.map((n) => [n, names.includes(n) ? settings.attack.sizes[n] : 0])) as Record<AttackName, number>;
    try {
      const attacks = servers.map(({ server, grpcPort }) => startAttacks({ host: "127.0.0.1", restPort: server.port, grpcPort, ...settings.attack, sizes }));
      await new Promise((r) => setTimeout(r, RAMP_MS));
      const start = servers.map(({ server }) => cpu(server.pid));
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, secs * 1000));
      const elapsed = (performance.now() - t0) / 1000;
      const end = servers.map(({ server }) => cpu(server.pid));
      servers.forEach((_, i) => {
        const stats = [...attacks[i]!.values()].map((a) => a.stop());
        // Over the attack's whole time (ramp included): what the server ended and answered.
        const events = stats.reduce((n, s) => n + s.endedByServer + Object.entries(s.counts).reduce((m, [k, v]) => m + (k === "calls opened" || k.startsWith("error") ? 0 : v), 0), 0);
        const rate = events / (elapsed + RAMP_MS / 1000);
        const main = (end[i]!.main - start[i]!.main) / elapsed;
        const all = (end[i]!.all - start[i]!.all) / elapsed;
        const per = (cores: number) => (rate > 0 ? ((cores / rate) * 1000).toFixed(3) : "n/a");
        console.log(`${trees[i]} | ${names.length === chosen.length && names.length > 1 ? "all" : names.join(",")} | ${rate.toFixed(0)} events/s | main ${main.toFixed(3)} cores, ${per(main)} ms/event | process ${all.toFixed(3)} cores, ${per(all)} ms/event`);
      });
    } finally {
      await Promise.all(servers.map(({ server }) => server.stop()));
    }
  }
} finally {
  repo.remove();
}
process.exit(0);
