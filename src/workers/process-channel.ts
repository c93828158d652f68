import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorToWire } from "../errors.js";
import { withMallocTunables } from "./allocator.js";
import type { Channel, ChannelEvents, ChannelFactory } from "./channel.js";
import type { ItemResult, ResultMessage, ToWorker, WorkerBoot } from "./messages.js";
import type { Launch } from "./process-launch.js";
import { signalExit } from "./restart-policy.js";
import { transferablesOf } from "./transfer.js";
import { FrameDecoder, SOCKET_ENV, encodeFrame, type WireMessage } from "./wire.js";

const ENTRY = fileURLToPath(new URL("./process-main.js", import.meta.url));

// A Node.js worker: `process.execPath` with this process's `execArgv`, so a loader such as tsx
// applies there too, and with its arguments, so a server module that reads them registers the
// same stages.
const nodeWorker = (): Launch => ({ file: process.execPath, args: [...process.execArgv, ENTRY, ...process.argv.slice(2)] });

/**
 * Runs a worker in a child process and talks to it in the frames of wire.ts over a Unix socket:
 * a Node.js process that serves the stage's Worker class (process-main.ts). The stage's
 * per-worker `env` is the child's real process environment. Its stdout and stderr are the
 * coordinator's.
 */
export const processChannel: ChannelFactory = (boot, env, events) => new ProcessChannel(nodeWorker(), boot, env, events);

/** Runs each worker as `launch`, a program of any language that speaks the wire protocol (a Python stage's, say). */
export function commandChannel(launch: Launch): ChannelFactory {
  return (boot, env, events) => new ProcessChannel(launch, boot, env, events);
}

class ProcessChannel implements Channel {
  readonly #events: ChannelEvents;
  /** A private directory (mode 0700) for the socket, so that only this user can connect. */
  readonly #dir: string;
  readonly #server: Server;
  readonly #decoder = new FrameDecoder();
  #child: ChildProcess | undefined;
  #socket: Socket | undefined;
  #socketOpen = false;
  /** The batches the worker holds, by their sequence number as the wire carries it (it wraps at 2^32): the full number, and the size. */
  readonly #pending = new Map<number, { seq: number; size: number }>();
  /** How the child ended, once it has. */
  #status: string | undefined;
  /** Why the coordinator killed a child that broke the protocol: says more than the signal. */
  #reason = "";
  #terminated = false;
  #cleaned = false;
  #reported = false;

  readonly #launch: Launch;

  constructor(launch: Launch, boot: WorkerBoot, env: Record<string, string> | undefined, events: ChannelEvents) {
    this.#launch = launch;
    this.#events = events;
    this.#dir = mkdtempSync(join(tmpdir(), "shoal-"));
    const path = join(this.#dir, "worker.sock");
    this.#server = createServer((socket) => this.#connected(socket, boot));
    this.#server.on("error", (err) => this.#ended(`cannot listen on ${path}: ${err.message}`));
    this.#server.listen(path, () => this.#spawn(path, env));
  }

  send(message: ToWorker): void {
    let frame: Buffer;
    try {
      frame = encodeFrame(message);
    } catch (err) {
      // A value MessagePack cannot carry (a cycle, say) fails its batch, not the worker. The
      // answer comes on a later tick, as a worker's would.
      if (message.kind === "batch") queueMicrotask(() => this.#events.message({ kind: "result", seq: message.seq, error: errorToWire(err, "ENCODING") }));
      else if (message.kind === "load") queueMicrotask(() => this.#events.message({ kind: "loadFailed", model: message.model, error: errorToWire(err, "ENCODING") }));
      return;
    }
    if (message.kind === "batch") this.#pending.set(message.seq >>> 0, { seq: message.seq, size: message.items.length });
    // The pool sends batches only to a worker that said ready, so the socket is there.
    this.#socket!.write(frame);
  }

  stop(): void {
    if (this.#socketOpen) this.send({ kind: "stop" });
    else this.terminate();
  }

  terminate(): void {
    this.#terminated = true;
    if (this.#child !== undefined) this.#child.kill("SIGKILL");
    else this.#ended("terminated before it started");
  }

  #spawn(path: string, env: Record<string, string> | undefined): void {
    if (this.#terminated) return;
    const { file, args, cwd } = this.#launch;
    const child = spawn(file, args, {
      cwd,
      env: withMallocTunables({ ...process.env, ...env, [SOCKET_ENV]: path }),
      stdio: ["ignore", "inherit", "inherit"],
      // Its own process group, so that Ctrl-C in a terminal reaches only the coordinator, which
      // drains and then stops its workers, as it does with threads.
      detached: true,
    });
    this.#child = child;
    child.on("error", (err) => {
      // Without a pid the child never ran, and no exit event follows.
      if (child.pid === undefined) this.#ended(`could not start: ${err.message}`);
    });
    child.on("exit", (code, signal) => this.#ended(signal !== null ? signalExit(signal) : `exited with code ${code}`));
  }

  #connected(socket: Socket, boot: WorkerBoot): void {
    if (this.#socket !== undefined) {
      socket.destroy();
      return;
    }
    this.#socket = socket;
    this.#socketOpen = true;
    // The connection outlives the listening socket: nothing else may connect, and nothing is
    // left in the temporary directory.
    this.#server.close();
    this.#cleanUp();
    socket.on("data", (chunk: Buffer) => this.#receive(chunk));
    socket.on("error", () => {
      // 'close' follows, and the child's exit status says more.
    });
    socket.on("close", () => {
      this.#socketOpen = false;
      // A worker without its socket cannot serve; make sure it is gone.
      this.#child?.kill("SIGKILL");
      this.#report();
    });
    socket.write(encodeFrame({ kind: "boot", ...boot }));
  }

  #receive(chunk: Buffer): void {
    let messages: WireMessage[];
    try {
      messages = this.#decoder.push(chunk);
    } catch (err) {
      this.#fail((err as Error).message);
      return;
    }
    for (const message of messages) {
      if (this.#reason !== "") return;
      if (message.kind === "boot" || message.kind === "batch" || message.kind === "flow" || message.kind === "load" || message.kind === "unload" || message.kind === "stop") {
        this.#fail(`a worker sent a ${message.kind} frame`);
      } else if (message.kind === "result") {
        const result = this.#result(message);
        if (result !== undefined) this.#events.message(result);
      } else if (message.kind === "stream") {
        const pending = this.#pending.get(message.seq);
        if (pending === undefined) this.#fail(`a stream chunk of batch ${message.seq}, which the worker does not have`);
        else this.#events.message({ ...message, seq: pending.seq });
      } else {
        this.#events.message(message);
      }
    }
  }

  // The result of the batch in the worker, with its full sequence number and the buffers that
  // can move on to a thread stage; undefined (and the worker ended) if it is not one.
  #result(message: ResultMessage): ResultMessage | undefined {
    const pending = this.#pending.get(message.seq);
    if (pending === undefined) {
      this.#fail(`a result for batch ${message.seq}, which the worker does not have`);
      return undefined;
    }
    this.#pending.delete(message.seq);
    if (message.results === undefined) return { ...message, seq: pending.seq };
    if (message.results.length !== pending.size) {
      this.#fail(`${message.results.length} results for a batch of ${pending.size}`);
      return undefined;
    }
    return { ...message, seq: pending.seq, results: message.results.map(withTransfer) };
  }

  // The child broke the protocol: nothing more it sends can be trusted.
  #fail(why: string): void {
    this.#reason ||= `protocol error: ${why}`;
    this.#child?.kill("SIGKILL");
    this.#socket?.destroy();
  }

  #ended(status: string): void {
    this.#status ??= status;
    this.#report();
  }

  // The worker is gone once the child has ended and its socket has closed, so that a result it
  // sent just before it died is still delivered.
  #report(): void {
    if (this.#reported || this.#status === undefined || this.#socketOpen) return;
    this.#reported = true;
    this.#server.close();
    this.#cleanUp();
    this.#events.exit(this.#reason || this.#status);
  }

  #cleanUp(): void {
    if (this.#cleaned) return;
    this.#cleaned = true;
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

// Decoded buffers are the item's own (see wire.ts), so they can move to a thread stage.
function withTransfer(result: ItemResult): ItemResult {
  if (!result.ok) return result;
  const own = transferablesOf(result.value);
  return own.size > 0 ? { ...result, transfer: [...own] } : result;
}
