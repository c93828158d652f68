/**
 * An OTLP/HTTP receiver that takes spans and throws them away, for measuring what tracing costs
 * the server (`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`). On SIGTERM it prints how
 * many export requests and bytes it took.
 *
 *   node --import tsx bench/tools/otlp-sink.ts [port 4318]
 */
import { startSpanSink } from "../lib/tracing-variants.js";

const sink = await startSpanSink(Number(process.argv[2] ?? 4318));
process.on("SIGTERM", () => {
  console.log(`otlp-sink: ${sink.requests} export requests, ${sink.bytes} bytes`);
  process.exit(0);
});
