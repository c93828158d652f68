/**
 * `shoal bench <target>`: the command's flags, what a target names, and the run: the first request
 * through the client, each level measured (src/bench/levels.ts), then the table, CSV, JSON, plot.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { Command, Option } from "commander";
import { Client } from "../client/client.js";
import { integer } from "../config.js";
import { inputsFromFile, inputsFromMetadata } from "../bench/inputs.js";
import { measureLevel, parseLevels, type Level, type LevelResult } from "../bench/levels.js";
import { scrape, stageTotals } from "../bench/prometheus-text.js";
import { toCsv, toPlot, toTable } from "../bench/report.js";
import { prepareTarget, type Protocol, type TargetSpec } from "../bench/targets.js";

const PROTOCOLS: Protocol[] = ["plain", "rest", "binary", "grpc", "openai", "chat"];

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

const collect = (value: string, previous: string[]) => [...previous, value];

/** `shoal bench <url-or-model>`: a concurrency sweep and a rate sweep of any V2, OpenAI or plain HTTP server. */
export function benchCommand(): Command {
  const command = new Command("bench")
    .description("Measure a server: requests/s and latency percentiles over a sweep of concurrency (closed loop) or request rate (Poisson arrivals).")
    .argument("<target>", "a route's URL (http://127.0.0.1:8000/inference), a V2 model's (http://127.0.0.1:8000/v2/models/NAME), an OpenAI route's (.../v1/completions), or a model's name on --url")
    .helpOption("-h, --help", "show this help")
    .allowExcessArguments(false)
    .option("--url <url>", "the server, when the target is a model's name", "http://127.0.0.1:8000")
    .addOption(new Option("--protocol <protocol>", "how requests are sent: V2 rest (JSON tensors), binary (binary tensors), grpc; plain; openai or chat (streamed); told by the target when left out").choices(PROTOCOLS))
    .option("--grpc-url <address>", "the gRPC address (default: the server's host, port 8001)")
    .option("--concurrency <levels>", "closed-loop levels: requests in flight (1,4,16 or 1:64 doubling or 8:64:8)")
    .option("--rate <levels>", "open-loop levels: requests a second, at Poisson arrivals (100,200 or 100:800 or 100:500:100)")
    .addOption(new Option("--window <seconds>", "length of a measurement window").argParser(Number).default(2))
    .addOption(new Option("--tolerance <percent>", "a level is measured once 3 windows in a row agree within this (throughput and mean latency)").argParser(Number).default(10))
    .addOption(new Option("--max-windows <n>", "windows at most per level (then it is reported unstable)").argParser(integer(3)).default(10))
    .addOption(new Option("--connections <n>", "most HTTP connections an open-loop level opens").argParser(integer(1)).default(256))
    .option("--body <text>", "a plain route's request body (JSON unless --content-type)")
    .option("--input-file <file>", "a plain route's body, or a V2 inference request as JSON (default: inputs made from the model's metadata)")
    .option("--content-type <type>", "a plain route's content type", "application/json")
    .option("--shape <name=dims>", "an input's shape over its metadata's (x=1,4); repeat for more", collect, [])
    .addOption(new Option("--dynamic-size <n>", "the size of variable (-1) dimensions in the metadata").argParser(integer(1)).default(1))
    .option("--model <name>", "the OpenAI model (default: the first of /v1/models)")
    .option("--prompt <text>", "the OpenAI prompt", "Fish swim in shoals.")
    .addOption(new Option("--max-tokens <n>", "tokens asked of each OpenAI request").argParser(integer(1)).default(64))
    .option("--ignore-eos", "ask for --max-tokens tokens whatever the model says (ignore_eos, as vLLM and Shoal take it)")
    .option("--metrics-url <url>", "where the server's Prometheus metrics are (default: the server's /metrics)")
    .option("--no-metrics", "do not read the server's metrics")
    .option("--csv <file>", "write the results as CSV (-: to the standard output)")
    .option("--json <file>", "write the results as JSON (-: to the standard output)")
    .option("--plot <file>", "write an SVG plot of latency against throughput (-: to the standard output)");
  command.addHelpText(
    "after",
    `
Each level runs in windows of --window seconds until three in a row agree (throughput and
mean latency within --tolerance %), at most --max-windows; the three are reported. Against a
Shoal server the table also shows the server's mean batch size and queue time, read from
its /metrics before and after them.

Examples:
  $ shoal bench http://127.0.0.1:8000/inference --body '{"x": 2}' --concurrency 1:64
  $ shoal bench mlp --protocol binary --concurrency 1:32 --csv mlp.csv --plot mlp.svg
  $ shoal bench mlp --protocol grpc --rate 200:1600 --shape input=1,4
  $ shoal bench http://127.0.0.1:8000/v1/completions --max-tokens 64 --concurrency 1:16`,
  );
  command.action(async (target: string) => {
    const o = command.opts();
    try {
      await run(target, o);
    } catch (err) {
      command.error(`error: ${(err as Error).message}`);
    }
  });
  return command;
}

async function run(targetText: string, o: Record<string, any>): Promise<void> {
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
