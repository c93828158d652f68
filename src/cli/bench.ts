/**
 * `shoal bench <target>`: the command's flags. The run (src/cli/bench-run.ts), with the client and
 * the load generator, is loaded only when the command runs: `shoal serve` parses the same program
 * and should not hold them.
 */
import { Command, Option } from "commander";
import { integer } from "../config.js";
import type { Protocol } from "../bench/targets.js";

const PROTOCOLS: Protocol[] = ["plain", "rest", "binary", "grpc", "openai", "chat"];

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
      const { run } = await import("./bench-run.js");
      await run(target, o);
    } catch (err) {
      command.error(`error: ${(err as Error).message}`);
    }
  });
  return command;
}
