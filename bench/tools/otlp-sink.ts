/**
 * An OTLP/HTTP receiver that takes spans and throws them away, for measuring what tracing costs
 * the server (`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`). On SIGTERM it prints how
 * many export requests and bytes it took.
 *
 *   node --import tsx bench/tools/otlp-sink.ts [port 4318]
 */
import { createServer } from "node:http";

let requests = 0;
let bytes = 0;
const server = createServer((req, res) => {
  req.on("data", (chunk: Buffer) => (bytes += chunk.byteLength));
  req.on("end", () => {
    requests++;
    res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
  });
});
server.listen(Number(process.argv[2] ?? 4318), "127.0.0.1");
process.on("SIGTERM", () => {
  console.log(`otlp-sink: ${requests} export requests, ${bytes} bytes`);
  process.exit(0);
});
