/**
 * Entry point of a process worker: connects to the coordinator's Unix socket (its path is in
 * `SHOAL_SOCKET`), waits for the boot frame, then serves its stage in the frames of wire.ts.
 * Without its coordinator a worker has nothing to do, so it exits when the socket closes.
 */
import { connect } from "node:net";
import type { ToWorker } from "./messages.js";
import { serveWorker, type WorkerLink } from "./worker-main.js";
import { FrameDecoder, ProtocolError, SOCKET_ENV, encodeFrame, type WireMessage } from "./wire.js";

const path = process.env[SOCKET_ENV];
if (path === undefined) {
  process.stderr.write(`shoal: ${SOCKET_ENV} is not set; a process worker is started by its server\n`);
  process.exit(2);
}

const socket = connect(path);
const decoder = new FrameDecoder();
let booted = false;
let handle: ((message: ToWorker) => void) | undefined;

const link: WorkerLink = {
  post: (message) => void socket.write(encodeFrame(message)),
  onMessage: (run) => (handle = run),
  exit: (code) => {
    process.exitCode = code;
    socket.end();
  },
};

function receive(message: WireMessage): void {
  if (message.kind === "boot" && !booted) {
    booted = true;
    void serveWorker(message, link);
  } else if ((message.kind === "batch" || message.kind === "flow" || message.kind === "load" || message.kind === "unload" || message.kind === "stop") && handle !== undefined) {
    handle(message);
  } else {
    throw new ProtocolError(`unexpected ${message.kind} frame`);
  }
}

socket.on("data", (chunk: Buffer) => {
  for (const message of decoder.push(chunk)) receive(message);
});
socket.on("error", (err) => {
  process.stderr.write(`shoal: ${SOCKET_ENV} ${path}: ${err.message}\n`);
  process.exitCode ||= 1;
});
socket.on("close", () => process.exit());

// An exception nothing caught ends the worker, as it ends a thread, but its stack goes to the
// server's log first; the coordinator then replaces the worker.
process.on("uncaughtException", (err) => {
  link.post({ kind: "log", level: "error", msg: "uncaught exception; the worker exits", fields: { err: err.stack ?? String(err) } }, []);
  link.exit(1);
});
