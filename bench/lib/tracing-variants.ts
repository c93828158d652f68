/**
 * Shoal with tracing off and on, side by side in one run. `--tracing <ratios>` (or BENCH_TRACING),
 * e.g. `0.01,1`, adds for every Shoal server of a comparison scenario a variant per ratio,
 * `<name>+trace<percent>%`, started with the OTEL_* environment that turns tracing on
 * (`parentbased_traceidratio` at that ratio) and sending its spans by OTLP to a receiver in the
 * harness that counts and drops them (its CPU is the harness's, not the server's). The server
 * itself is the tracing-off side. Each variant is measured back to back with its server at each
 * load (bench/lib/against.ts's groups), and the report adds traced/off req/s and CPU per request.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { comparePairs, comparisonTable, overallRatio } from "./against.js";
import type { Contender, Point, SweepResult } from "./sweep.js";

/** The suffix of a server's name with tracing on, before its sampled percentage. */
export const TRACED = "+trace";

/** Reads `--tracing` (or BENCH_TRACING): sampling ratios in (0, 1], comma-separated; undefined without it. */
export function tracingRatios(value: string | undefined): number[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const ratios = value.split(",").map((x) => Number(x.trim()));
  if (!ratios.every((r) => Number.isFinite(r) && r > 0 && r <= 1)) throw new Error(`--tracing must be sampling ratios in (0, 1], comma-separated (e.g. 0.01,1), not '${value}'`);
  return ratios;
}

const percent = (ratio: number) => `${Number((ratio * 100).toPrecision(3))}%`;

/** The contenders, each Shoal server followed by one variant per ratio with tracing on to `endpoint`. */
export function withTracing(contenders: readonly Contender[], ratios: readonly number[] | undefined, endpoint: string): Contender[] {
  if (ratios === undefined) return [...contenders];
  return contenders.flatMap((c) => {
    if (c.shoal !== true || c.spec === undefined || c.name.includes("@")) return [c];
    const spec = c.spec;
    return [
      c,
      ...ratios.map((ratio) => ({
        ...c,
        name: `${c.name}${TRACED}${percent(ratio)}`,
        config: `${c.config}; tracing on, ${percent(ratio)} of requests sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=${ratio}), spans sent by OTLP http/protobuf to a receiver in the harness`,
        spec: { ...spec, env: { ...spec.env, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: String(ratio) } },
      })),
    ];
  });
}

/** An OTLP/HTTP receiver that counts what it is sent and drops it. */
export interface SpanSink {
  readonly url: string;
  readonly requests: number;
  readonly bytes: number;
  close(): Promise<void>;
}

/** Starts a {@link SpanSink} on a loopback port (a free one by default). */
export async function startSpanSink(port = 0): Promise<SpanSink> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (bytes += chunk.byteLength));
    req.on("end", () => {
      requests++;
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return requests;
    },
    get bytes() {
      return bytes;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The tracing part of a report: traced against off for every variant at every load, as Markdown
 * and as text. Undefined without `--tracing`.
 */
export function tracingReport(result: SweepResult): { markdown: string[]; text: string } | undefined {
  const names = result.contenders.filter((c) => c.unavailable === undefined).map((c) => c.name);
  const pairs = names.filter((n) => n.includes(TRACED)).map((n) => ({ after: n, before: n.slice(0, n.indexOf(TRACED)) })).filter((p) => names.includes(p.before));
  if (pairs.length === 0) return undefined;
  const table = comparisonTable(comparePairs(result, pairs), "off", "traced", false);
  const overall = pairs.map(({ after, before }) => {
    const cpu = overallRatio(result, after, before, (p: Point) => p.cpuUsPerRequest);
    const rps = overallRatio(result, after, before, (p: Point) => p.requestsPerSec);
    return `**${after}**: CPU per request ${cpu.toFixed(3)}×, req/s ${rps.toFixed(3)}× of ${before}'s`;
  });
  const sink = result.extra.spanSink as { requests: number; bytes: number } | undefined;
  const markdown = [
    "## Tracing off and on",
    "",
    `Each Shoal server with tracing off and, as \`<server>${TRACED}<percent>\`, on at that sampling ratio, side by side in this run: at each load of each round the variants of a server were measured back to back. ` +
      "The ratios are medians over the rounds of traced/off, their range in brackets; CPU µs/req is the server's CPU time (all threads) per answered request, the OTLP export included." +
      (sink !== undefined ? ` The receiver took ${sink.requests} export requests, ${(sink.bytes / 1e6).toFixed(1)} MB.` : ""),
    "",
    table.markdown,
    "",
    `Over every round and load (medians): ${overall.join("; ")}.`,
    "",
  ];
  return { markdown, text: `${table.text}\n\n${overall.join("\n").replaceAll("**", "")}` };
}
