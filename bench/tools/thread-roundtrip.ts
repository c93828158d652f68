/**
 * How fast one worker thread can answer the main thread: round trips per second of a message
 * shaped like Shoal's batch message (one item with its request metadata and an 8-byte body),
 * with 1 message in flight (what one Shoal worker with maxBatchSize 1 gets) and with several.
 *
 *   node --import tsx bench/tools/thread-roundtrip.ts [--n 100000] [--windows 1,2,4,16]
 *
 * Run it under `taskset -c 0` to see both threads share one core.
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";

// The worker answers each batch with a small result, as one returning {"y": ...} as bytes would.
// Plain JavaScript, evaluated, so that the worker needs no TypeScript loader.
const WORKER = `
const { parentPort } = require("node:worker_threads");
parentPort.on("message", (m) => {
  const body = new Uint8Array(22);
  parentPort.postMessage({ kind: "result", seq: m.seq, results: [{ ok: true, value: body }] }, [body.buffer]);
});
`;

{
  const { values } = parseArgs({ options: { n: { type: "string", default: "100000" }, windows: { type: "string", default: "1,2,4,16" } } });
  const n = Number(values.n);
  const headers = { host: "127.0.0.1:8000", "content-type": "application/json", "content-length": "8" };
  const message = (seq: number) => {
    const payload = new Uint8Array(8);
    return {
      msg: { kind: "batch", seq, items: [{ payload, ingress: true, egress: true, meta: { requestId: randomUUID(), headers, deadline: Date.now() + 3000, route: "/inference" } }] },
      transfer: [payload.buffer],
    };
  };
  const worker = new Worker(WORKER, { eval: true });
  const run = (window: number) =>
    new Promise<number>((resolve) => {
      let sent = 0;
      let got = 0;
      const t0 = performance.now();
      const send = () => {
        const { msg, transfer } = message(sent++);
        worker.postMessage(msg, transfer);
      };
      const onMessage = () => {
        if (++got === n) {
          worker.off("message", onMessage);
          resolve((performance.now() - t0) / n);
          return;
        }
        if (sent < n) send();
      };
      worker.on("message", onMessage);
      for (let i = 0; i < window && sent < n; i++) send();
    });
  await run(Math.min(n, 20000)); // warm-up
  for (const w of values.windows!.split(",").map(Number)) {
    const ms = await run(w);
    console.log(`${String(w).padStart(3)} in flight: ${Math.round(1000 / ms).toLocaleString("en-US").padStart(8)} round trips/s, ${(ms * 1000).toFixed(1)} µs each`);
  }
  await worker.terminate();
}
