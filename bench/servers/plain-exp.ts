/**
 * Baseline for the core benchmark: the calculate-exp work done inline on a plain node:http
 * server, with no worker thread, queue or batching.
 *
 *   node --import tsx bench/servers/plain-exp.ts --port 8001 --address 127.0.0.1
 *
 * Same contract as Shoal's example on POST /inference: {"x": 2} -> {"y": 7.389...} with
 * content-type application/json; 422 when x is missing or not a number, 400 on bad JSON.
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8001" },
    address: { type: "string", default: "127.0.0.1" },
  },
});

function send(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

const server = createServer((req, res) => {
  if (req.url !== "/inference" || req.method !== "POST") {
    send(res, req.url === "/inference" ? 405 : 404, { error: "not found" });
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      send(res, 400, { error: "decoding: invalid JSON" });
      return;
    }
    if (body === null || typeof body !== "object" || !("x" in body)) {
      send(res, 422, { error: "validation: cannot find key 'x'" });
      return;
    }
    const x = Number(body.x);
    if (Number.isNaN(x)) {
      send(res, 422, { error: "validation: cannot convert 'x' value to float" });
      return;
    }
    send(res, 200, { y: Math.exp(x) });
  });
});

server.listen(Number(values.port), values.address, () => {
  process.stdout.write(JSON.stringify({ msg: "ready", port: Number(values.port) }) + "\n");
});

const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
