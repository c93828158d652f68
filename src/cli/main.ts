#!/usr/bin/env node
/**
 * The `shoal` command: `shoal serve model.onnx` serves a model with no code; `shoal bench` measures a server.
 *
 * Worker threads import this module again with the same arguments (as they import any server's
 * main module), so parsing them there registers the same stage, and `run()` returns at once.
 */
import { readFileSync } from "node:fs";
import { isMainThread } from "node:worker_threads";
import { mallocTuned, withMallocTunables, withYoungGenerationCap } from "../workers/allocator.js";

// glibc reads how its malloc is set up only when the process starts, and V8 its semi-spaces' size
// (see allocator.ts): the command starts itself again, in the same process, with both set. Node
// 22.15 and later can.
const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
if (isMainThread && process.platform === "linux" && execve !== undefined && !mallocTuned(process.env)) {
  execve(process.execPath, [process.execPath, ...withYoungGenerationCap(process.execArgv, process.env), ...process.argv.slice(1)], withMallocTunables(process.env));
}

const { Command } = await import("commander");
const { serveCommand } = await import("./serve.js");
const { pythonCommand } = await import("./python-stages.js");
const { benchCommand } = await import("./bench.js");

const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };

const program = new Command("shoal")
  .description("Model serving for TypeScript on Node.js: dynamic batching, pipelined stages, parallel workers.")
  .version(version, "-V, --version", "show the version")
  .helpOption("-h, --help", "show this help")
  .addHelpCommand(false)
  .addCommand(serveCommand())
  .addCommand(pythonCommand())
  .addCommand(benchCommand())
  .addHelpText(
    "after",
    `
Examples:
  $ shoal serve model.onnx                                  serve on :8000, batching up to 32 requests
  $ shoal serve model.onnx --num 2 --max-batch-size 64 --port 8080
  $ shoal serve --help                                      every flag of serve
  $ shoal bench http://127.0.0.1:8000/inference --body '{"input": [[0.1, 0.2, 0.3, 0.4]]}'
  $ shoal bench --help                                      every flag of bench

Servers with code of their own (a Worker class and Server.run()) take the same server flags.`,
  );

await program.parseAsync(process.argv);
