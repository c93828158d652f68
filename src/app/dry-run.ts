import { ShoalError } from "../errors.js";
import { Task } from "../scheduling/task.js";
import type { Route } from "../serving/route.js";

/** How one route's example went. */
interface Outcome {
  status: number;
  detail: string;
}

/**
 * Sends each route's example (declared by its first stage's Worker) through the whole pipeline
 * and prints each stage's forward time and the result. Returns true when every example was
 * answered 200. A route whose first Worker declares no example is reported and skipped.
 */
export async function dryRun(routes: readonly Route[], timeoutMs: number, print: (line: string) => void): Promise<boolean> {
  let ok = true;
  for (const route of routes) {
    const first = route.stages[0]!;
    const example = first.pool.declared?.example;
    if (example === undefined) {
      print(`${route.path}: skipped, ${first.name} declares no example`);
      continue;
    }
    const started = performance.now();
    const trace: { stage: string; ms: number }[] = [];
    const outcome = await new Promise<Outcome>((resolve) => {
      const meta = { requestId: "dry-run", headers: {}, deadline: Date.now() + timeoutMs, route: route.path };
      const task = new Task(route.stages, meta, started + timeoutMs, example, undefined, {
        send: (body, contentType) => resolve({ status: 200, detail: `${body.byteLength} bytes of ${contentType}` }),
        fail: (error: ShoalError) => resolve({ status: error.status, detail: error.publicMessage }),
        // A dry run's task does not ask for a stream: a streaming stage's chunks come gathered.
        chunk: () => {},
        end: () => {},
        release: () => {},
      });
      task.decoded = true;
      task.trace = trace;
      const refused = first.admit(task);
      if (refused !== undefined) task.fail(refused);
    });
    const total = performance.now() - started;
    const steps = trace.map((t) => `${t.stage} ${t.ms.toFixed(2)} ms`).join(" -> ");
    print(`${route.path}: ${steps || "no stage ran"} => ${outcome.status}, ${outcome.detail} (${total.toFixed(2)} ms in all)`);
    if (outcome.status !== 200) ok = false;
  }
  return ok;
}
