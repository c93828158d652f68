/**
 * The run of `shoal bench <target>`: what a target names, the first request through the client,
 * each level measured (src/bench/levels.ts), then the table, CSV, JSON, plot.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { Client } from "../client/client.js";
import { inputsFromFile, inputsFromMetadata } from "../bench/inputs.js";
import { measureLevel, parseLevels, type Level, type LevelResult } from "../bench/levels.js";
import { scrape, stageTotals } from "../bench/prometheus-text.js";
import { toCsv, toPlot, toTable } from "../bench/report.js";
import { prepareTarget, type Protocol, type TargetSpec } from "../bench/targets.js";

/** Where a target names a model, a route or an OpenAI route, and how it is called unless told. */
function targetOf(target: string, base: string): { url: string; protocol: Protocol; path?: string; model?: string; version?: string } {
  if (!/^https?:\/\//.test(target)) return { url: base.replace(/\/+$/, ""), protocol: "rest", model: target };
  const u = new URL(target);
  const v2 = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?(?:\/infer)?\/?$/.exec(u.pathname);
  if (v2 !== null) return { url: u.origin, protocol: "rest", model: decodeURIComponent(v2[1]!), ...(v2[2] === undefined ? {} : { version: decodeURIComponent(v2[2]) }) };
  if (u.pathname === "/v1/completions") return { url: u.origin, protocol: "openai" };
  if (u.pathname === "/v1/chat/completions") return { url: u.origin, protocol: "chat" };
  return { url: u.origin, protocol: "plain", path: `${u.pathname}${u.search}` };
}

/** Runs the command's sweep against `targetText` with its parsed flags `o`. */
export async function run(targetText: string, o: Record<string, any>): Promise<void> {
  const where = targetOf(targetText, o.url as string);
  const protocol: Protocol = (o.protocol as Protocol | undefined) ?? where.protocol;
  const v2 = protocol === "rest" || protocol === "binary" || protocol === "grpc";
  const openai = protocol === "openai" || protocol === "chat";
  if (v2 && where.model === undefined) throw new Error(`--protocol ${protocol} needs a V2 model: give its name, or its URL (${where.url}/v2/models/NAME)`);
  const concurrency = o.concurrency === undefined ? [] : parseLevels(o.concurrency as string);
  const rates = o.rate === undefined ? [] : parseLevels(o.rate as string);
  const levels: Level[] = [...concurrency.map((value) => ({ mode: "concurrency" as const, value })), ...rates.map((value) => ({ mode: "rate" as const, value }))];
  if (levels.length === 0) levels.push(...parseLevels("1:16").map((value) => ({ mode: "concurrency" as const, value })));
  const spec: TargetSpec = {
    protocol,
    url: where.url,
    connections: Math.max(o.connections as number, ...concurrency),
    ...(where.path === undefined ? {} : { path: where.path }),
    ...(where.version === undefined ? {} : { version: where.version }),
  };
  if (v2) {
    spec.model = where.model!;
    spec.grpcAddress = (o.grpcUrl as string | undefined) ?? `${new URL(where.url).hostname}:8001`;
    const shapes = Object.fromEntries((o.shape as string[]).map((s) => {
      const [name, dims] = s.split("=");
      if (name === undefined || dims === undefined || !/^\d+(,\d+)*$/.test(dims)) throw new Error(`--shape ${s}: give it as name=1,4`);
      return [name, dims.split(",").map(Number)];
    }));
    spec.input = o.inputFile !== undefined ? inputsFromFile(o.inputFile as string) : inputsFromMetadata(await new Client(where.url).v2.modelMetadata(where.model!, where.version === undefined ? {} : { version: where.version }), { dynamicSize: o.dynamicSize as number, shapes });
  } else if (openai) {
    spec.model = (o.model as string | undefined) ?? where.model;
    spec.prompt = o.prompt as string;
    spec.maxTokens = o.maxTokens as number;
    spec.ignoreEos = o.ignoreEos === true;
  } else {
    const body = o.inputFile !== undefined ? readFileSync(o.inputFile as string) : o.body === undefined ? undefined : Buffer.from(o.body as string);
    if (body !== undefined) spec.body = body;
    spec.contentType = o.contentType as string;
  }
  const target = await prepareTarget(spec);
  const described = `${protocol} ${v2 ? `${where.url} model ${where.model}` : openai ? `${where.url} model ${spec.model ?? "(first)"}` : `${where.url}${where.path}`}`;
  const tty = process.stderr.isTTY === true;
  const metricsUrl = ((o.metricsUrl as string | undefined) ?? where.url).replace(/\/metrics\/?$/, "");
  const readServer = o.metrics === false ? undefined : async () => stageTotals(await scrape(metricsUrl), v2 ? where.model : undefined);
  const results: LevelResult[] = [];
  process.stderr.write(`shoal bench: ${described}; windows of ${o.window} s until 3 agree within ${o.tolerance} % (at most ${o.maxWindows})\n`);
  try {
    for (const level of levels) {
      const result = await measureLevel(target.send, level, {
        windowSec: o.window as number,
        tolerance: (o.tolerance as number) / 100,
        maxWindows: o.maxWindows as number,
        ...(readServer === undefined ? {} : { readServer }),
        progress: (l, n, last) => {
          if (tty) process.stderr.write(`\r\x1b[K${l.mode} ${l.value}: window ${n}/${o.maxWindows as number}  ${last.requestsPerSec.toFixed(0)} req/s  p99 ${last.p99Ms.toFixed(2)} ms${last.errors > 0 ? `  ${last.errors} errors` : ""}`);
        },
      });
      if (tty) process.stderr.write("\r\x1b[K");
      process.stderr.write(`${level.mode} ${level.value}: ${result.requestsPerSec.toFixed(1)} req/s, p99 ${result.p99Ms.toFixed(3)} ms${result.stable ? "" : " (unstable)"}\n`);
      results.push(result);
    }
  } finally {
    target.close();
  }
  const json = { target: { described, protocol, url: where.url, model: spec.model, path: where.path }, settings: { windowSec: o.window, tolerancePercent: o.tolerance, maxWindows: o.maxWindows }, machine: { node: process.version }, results };
  const outputs: [string | undefined, string][] = [
    [o.csv as string | undefined, toCsv(results)],
    [o.json as string | undefined, JSON.stringify(json, null, 2) + "\n"],
    [o.plot as string | undefined, toPlot(results, `shoal bench: ${described}`)],
  ];
  // A file named `-` is the standard output, and the table goes to the standard error.
  (outputs.some(([file]) => file === "-") ? process.stderr : process.stdout).write(toTable(results));
  for (const [file, text] of outputs) if (file === "-") process.stdout.write(text);
  else if (file !== undefined) writeFileSync(file, text);
}
