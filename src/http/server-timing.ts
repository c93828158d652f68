import type { Task } from "../scheduling/task.js";

/**
 * The `Server-Timing` header of an accepted request's answer: its time in queues, at workers
 * (round trip included) and in all, in ms. The parts are rounded down and the total up, so that
 * queue + forward ≤ total holds as written.
 */
export function serverTiming(task: Task, totalMs: number): string {
  return `queue;dur=${hundredths(Math.floor(task.queueMs * 100))}, forward;dur=${hundredths(Math.floor(task.forwardMs * 100))}, total;dur=${hundredths(Math.ceil(totalMs * 100))}`;
}

// A count of hundredths of a ms as `String(h / 100)` writes it (12.3, 0.05, 7), from whole
// numbers only: on every answer, formatting three fractions cost three times as much.
function hundredths(h: number): string {
  const whole = Math.trunc(h / 100);
  const rest = h - whole * 100;
  if (rest === 0) return `${whole}`;
  if (rest % 10 === 0) return `${whole}.${rest / 10}`;
  return rest < 10 ? `${whole}.0${rest}` : `${whole}.${rest}`;
}
