import type { Task } from "../scheduling/task.js";

/**
 * The `Server-Timing` header of an accepted request's answer: its time in queues, at workers
 * (round trip included) and in all, in ms. The parts are rounded down and the total up, so that
 * queue + forward ≤ total holds as written.
 */
export function serverTiming(task: Task, totalMs: number): string {
  return `queue;dur=${down(task.queueMs)}, forward;dur=${down(task.forwardMs)}, total;dur=${Math.ceil(totalMs * 100) / 100}`;
}

function down(ms: number): number {
  return Math.floor(ms * 100) / 100;
}
