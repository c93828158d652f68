/**
 * What any server of the model scenario must at least do, and nothing more: read each request's
 * body whole and answer a fixed answer of the model's size (1000 floats: JSON text, or MessagePack
 * with raw float32 bytes). No parsing, batching or model. Served by Bun.serve on Bun, node:http on
 * Node. Used by bench/tools/traffic-floor.ts.
 *
 *   node bench/servers/null-model.mjs <port> json|msgpack
 */
import { createServer } from "node:http";
import { pack } from "msgpackr";

const [port, format] = [Number(process.argv[2]), process.argv[3]];
const values = Array.from({ length: 1000 }, (_, i) => Math.sin(i) * 3.14159);
const answer =
  format === "msgpack"
    ? pack({ output: { data: new Uint8Array(Float32Array.from(values).buffer), shape: [1, 1000], type: "float32" } })
    : Buffer.from(JSON.stringify({ output: [values] }));
const type = format === "msgpack" ? "application/msgpack" : "application/json";

if (globalThis.Bun !== undefined) {
  globalThis.Bun.serve({
    port,
    hostname: "127.0.0.1",
    async fetch(req) {
      await req.arrayBuffer();
      return new Response(answer, { headers: { "content-type": type } });
    },
  });
} else {
  createServer((req, res) => {
    req.on("data", () => {});
    req.on("end", () => {
      res.writeHead(200, { "content-type": type });
      res.end(answer);
    });
  }).listen(port, "127.0.0.1");
}
process.stdout.write(`listening on ${port}\n`);
