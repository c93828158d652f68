/**
 * A benchmark's helper process (a script of bench/tools/, run with tsx) spoken to over IPC: the
 * parent asks, the child answers each question once, in order. Load that runs in a process of its
 * own takes no turns of the measuring process's event loop, and its CPU is metered apart.
 */
import { fork, spawnSync, type Serializable } from "node:child_process";
import type { CpuSet } from "./machine.js";

/** A running helper process. */
export interface Forked {
  pid: number;
  /** Sends `question` and resolves with the child's answer; rejects when the child exits first. */
  ask<T>(question: Serializable): Promise<T>;
}

/**
 * Starts `script` with `setup` (as JSON, its first argument) and resolves once it has said it is
 * ready (its first message). With `cpus`, the child and its threads are pinned there (taskset).
 * The child is killed when this process exits.
 */
export async function forkHelper(root: string, script: string, setup: unknown, cpus?: CpuSet): Promise<Forked> {
  const child = fork(script, [JSON.stringify(setup)], { cwd: root, execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"], serialization: "advanced" });
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  // Answers come in the order of the questions.
  const waiting: { resolve(answer: unknown): void; reject(err: Error): void }[] = [];
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      waiting.push({ resolve, reject });
    });
  child.on("message", (answer) => waiting.shift()?.resolve(answer));
  let exited: Error | undefined;
  child.once("exit", (code, signal) => {
    exited = new Error(`${script} exited (${code ?? signal}) before it answered`);
    for (const w of waiting.splice(0)) w.reject(exited);
  });
  await next();
  if (cpus !== undefined) {
    // -a: every thread it has; the threads it starts later inherit the affinity.
    const pin = spawnSync("taskset", ["-a", "-p", "-c", cpus.join(","), String(child.pid)], { encoding: "utf8" });
    if (pin.status !== 0) throw new Error(`taskset could not pin ${script}: ${pin.stderr || pin.error?.message}`);
  }
  return {
    pid: child.pid!,
    ask: <T>(question: Serializable) => {
      if (exited !== undefined) return Promise.reject(exited);
      const answer = next() as Promise<T>;
      // With a callback, a channel closed under the question is not an error event of the process:
      // the child's exit rejects the question.
      child.send(question, () => {});
      return answer;
    },
  };
}

/**
 * The child's side: reads its setup, runs `start` with it, says it is ready, then answers each
 * question with what `answer` returns. After answering "stop" it exits.
 */
export async function answerQuestions<S>(start: (setup: S) => ((question: unknown) => unknown) | Promise<(question: unknown) => unknown>): Promise<void> {
  const answer = await start(JSON.parse(process.argv[2]!) as S);
  // Questions are answered one at a time, in order, even when an answer takes a while.
  let last: Promise<unknown> = Promise.resolve();
  process.on("message", (question) => {
    last = last.then(async () => {
      const reply = await answer(question);
      process.send!(reply ?? null, () => {
        if (question === "stop") process.exit(0);
      });
    });
  });
  process.send!({ ready: true });
}
