/**
 * Baseline for the core and echo benchmarks: the calculate-exp work done inline on the runtime's
 * own HTTP server (node:http on Node, `Bun.serve` on Bun), with no worker thread, queue or batching.
 *
 *   node --import tsx bench/servers/plain-exp.ts --port 8001 --address 127.0.0.1
 *   bun bench/servers/plain-exp.ts --port 8001 --address 127.0.0.1
 *
 * Same contract as Shoal's example on POST /inference: {"x": 2} -> {"y": 7.389...} with
 * content-type application/json; 422 when x is missing or not a number, 400 on bad JSON.
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";

/** The little of Bun's API this script uses (Bun's own types are not installed). */
declare const Bun:
  | {
      serve(options: {
        port: number;
        hostname: string;
        routes: Record<string, Record<string, (req: Request) => Promise<Response>>>;
        fetch(req: Request): Response;
      }): { stop(closeActiveConnections?: boolean): void };
    }
  | undefined;

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8001" },
    address: { type: "string", default: "127.0.0.1" },
  },
});

/** The answer to a body: its status and JSON value. */
function exp(text: string): [number, unknown] {
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return [400, { error: "decoding: invalid JSON" }];
  }
  if (body === null || typeof body !== "object" || !("x" in body)) return [422, { error: "validation: cannot find key 'x'" }];
  const x = Number(body.x);
  if (Number.isNaN(x)) return [422, { error: "validation: cannot convert 'x' value to float" }];
  return [200, { y: Math.exp(x) }];
}

const notFound = { error: "not found" };

function listenNode(port: number, address: string, ready: () => void): () => void {
  const send = (res: ServerResponse, [status, value]: [number, unknown]) => {
    const body = JSON.stringify(value);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  };
  const server = createServer((req, res) => {
    if (req.url !== "/inference" || req.method !== "POST") {
      send(res, [req.url === "/inference" ? 405 : 404, notFound]);
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => send(res, exp(Buffer.concat(chunks).toString("utf8"))));
  });
  server.listen(port, address, ready);
  return () => server.close(() => process.exit(0));
}

function listenBun(port: number, address: string, ready: () => void): () => void {
  const headers = { "content-type": "application/json" };
  const respond = ([status, value]: [number, unknown]) => new Response(JSON.stringify(value), { status, headers });
  const server = Bun!.serve({
    port,
    hostname: address,
    routes: { "/inference": { POST: async (req) => respond(exp(await req.text())) } },
    fetch: (req) => respond([new URL(req.url).pathname === "/inference" ? 405 : 404, notFound]),
  });
  ready();
  return () => {
    server.stop();
    process.exit(0);
  };
}

const port = Number(values.port);
const ready = () => process.stdout.write(JSON.stringify({ msg: "ready", port }) + "\n");
const stop = typeof Bun === "undefined" ? listenNode(port, values.address, ready) : listenBun(port, values.address, ready);
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
