import { accessSync, constants } from "node:fs";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { addServerFlags, integer, serverConfigOf } from "../config.js";
import { onnxWorker, type OnnxSessionOptions } from "../onnx/onnx-worker.js";
import { Server } from "../app/server.js";
import { mlserverServerSettings } from "../models/mlserver-settings.js";
import type { ServerConfig } from "../config.js";

const GRAPH_OPTIMIZATIONS: NonNullable<OnnxSessionOptions["graphOptimization"]>[] = ["disabled", "basic", "extended", "all"];
const EXECUTION_MODES: NonNullable<OnnxSessionOptions["executionMode"]>[] = ["sequential", "parallel"];

/**
 * `shoal serve <model.onnx>`: one ONNX stage with dynamic batching, and the server flags;
 * `shoal serve --model-repository DIR`: every model of DIR with the V2 protocol on a shared pool.
 */
export function serveCommand(): Command {
  const command = new Command("serve")
    .description("Serve an ONNX model, or a model repository, over HTTP with dynamic batching: no code needed.")
    .argument("[model]", "path of the .onnx file (or give --model-repository)")
    .helpOption("-h, --help", "show this help")
    .allowExcessArguments(false)
    .addOption(new Option("--num <workers>", "workers in parallel, each with its own session").env("SHOAL_NUM").argParser(integer(1)).default(1))
    .addOption(new Option("--max-batch-size <items>", "most requests one run takes (1: no batching)").env("SHOAL_MAX_BATCH_SIZE").argParser(integer(1)).default(32))
    .addOption(new Option("--max-wait-ms <ms>", "how long a partial batch waits for more after its oldest request arrived").env("SHOAL_MAX_WAIT_MS").argParser(integer(0)).default(5))
    .addOption(new Option("--route <path>", "the path requests are POSTed to").env("SHOAL_ROUTE").default("/inference"))
    .addOption(new Option("--intra-op-threads <n>", "threads one operator may use in each worker (default: cores / num, at least 1)").env("SHOAL_INTRA_OP_THREADS").argParser(integer(1)))
    .addOption(new Option("--graph-optimization <level>", "graph optimisations applied when the model loads").env("SHOAL_GRAPH_OPTIMIZATION").choices(GRAPH_OPTIMIZATIONS).default("all"))
    .addOption(new Option("--execution-mode <mode>", "run operators one at a time, or independent branches in parallel").env("SHOAL_EXECUTION_MODE").choices(EXECUTION_MODES).default("sequential"));
  addServerFlags(command);
  command.addHelpText(
    "after",
    `
Requests are JSON with one field per model input, as nested arrays or as
{"data": [...flat], "shape": [...]}; responses have one field per output, as nested
arrays. A request with the content-type application/msgpack is MessagePack and gets
MessagePack back, each output as {"data": <raw little-endian bytes>, "shape", "type"}.
A request that does not fit the model gets 422 naming the input and what it expects.

Example:
  $ shoal serve mlp.onnx --num 2 --max-batch-size 64
  $ curl -X POST http://127.0.0.1:8000/inference -d '{"input": [[0.1, 0.2, 0.3, 0.4]]}'

With --model-repository, every model folder of DIR (a model-settings.json and its
files; see docs/models.md) is served with the V2 protocol on one shared pool of
--workers workers, e.g.:
  $ shoal serve --model-repository ./models --workers 2
  $ curl http://127.0.0.1:8000/v2/models/mlp`,
  );
  command.action(async (model: string | undefined) => {
    const o = command.opts();
    if (model === undefined) {
      if (o.modelRepository === undefined) command.error("error: give the model file to serve, or --model-repository <dir>");
      await new Server().run(withMLServerSettings(command, serverConfigOf(command)));
      return;
    }
    const file = resolve(model);
    try {
      accessSync(file, constants.R_OK);
    } catch {
      command.error(`error: cannot read the model file '${model}'`);
    }
    const server = new Server();
    try {
      const worker = onnxWorker({ model: file, intraOpThreads: o.intraOpThreads, graphOptimization: o.graphOptimization, executionMode: o.executionMode });
      server.appendWorker(worker, { num: o.num, maxBatchSize: o.maxBatchSize, maxWaitMs: o.maxWaitMs, route: o.route });
    } catch (err) {
      command.error(`error: ${(err as Error).message}`);
    }
    await server.run(serverConfigOf(command));
  });
  return command;
}

// An MLServer repository's `settings.json` (or the MLSERVER_* variables) gives the ports and the
// address that no flag and no SHOAL_* variable gives, as `mlserver start` takes them.
function withMLServerSettings(command: Command, config: ServerConfig): ServerConfig {
  let settings;
  try {
    settings = mlserverServerSettings(resolve(config.modelRepository!));
  } catch (err) {
    command.error(`error: ${(err as Error).message}`);
  }
  const unset = (flag: string) => command.getOptionValueSource(flag) === "default";
  return {
    ...config,
    ...(settings.http_port !== undefined && unset("port") ? { port: settings.http_port } : {}),
    ...(settings.grpc_port !== undefined && unset("grpcPort") ? { grpcPort: settings.grpc_port } : {}),
    ...(settings.host !== undefined && unset("address") ? { address: settings.host } : {}),
  };
}
