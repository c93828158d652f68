/**
 * Preloaded into a server (`node --import ./bench/tools/heap-spaces.mjs ...`; worker threads
 * inherit it), writes the V8 heap of each of its threads to `$HEAP_SPACES_DIR/<pid>-<thread>.json`
 * every second, for bench/tools/memory-map.ts to show beside the process's mappings.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { getHeapSpaceStatistics, getHeapStatistics } from "node:v8";
import { isMainThread, threadId } from "node:worker_threads";

const dir = process.env.HEAP_SPACES_DIR ?? "/tmp/heap-spaces";
mkdirSync(dir, { recursive: true });
const write = () => {
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name.replace(/_space$/, ""), s.physical_space_size]));
  const { total_physical_size: physical, used_heap_size: used } = getHeapStatistics();
  writeFileSync(`${dir}/${process.pid}-${threadId}.json`, JSON.stringify({ thread: isMainThread ? "main" : `worker ${threadId}`, physical, used, spaces }));
};
setInterval(write, 1000).unref();
