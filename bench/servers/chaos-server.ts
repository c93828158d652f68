/**
 * Benchmark server for the chaos run: a two-stage pipeline (`/chaos/work`, batching, two workers
 * a stage) and, with `--model-repository`, the repository's models on the shared pool. Every
 * worker runs as a thread or a process as `CHAOS_ISOLATION` says (the shared pool follows
 * `--model-isolation`).
 *
 *   CHAOS_ISOLATION=process node --import tsx bench/servers/chaos-server.ts --port 8000 --model-repository dir --model-isolation process
 *
 * A request `{"x": 1, "exit": "parse"}` (or `"compute"`) ends the worker of that stage that runs
 * it, from inside, as `process.exit()` does in a thread: the way the chaos run kills a thread,
 * which no signal can reach on its own.
 */
import { Server, ValidationError, Worker } from "shoal";

const isolation = process.env.CHAOS_ISOLATION === "process" ? "process" : "thread";

interface Item {
  x: number;
  exit?: "parse" | "compute";
}

/** Checks each item: `x` a finite number. */
export class Parse extends Worker {
  forward(items: unknown[]): (Item | Error)[] {
    if (items.some((item) => (item as Item | null)?.exit === "parse")) process.exit(1);
    return items.map((item) => {
      const x = (item as { x?: unknown } | null)?.x;
      if (typeof x !== "number" || !Number.isFinite(x)) return new ValidationError("'x' must be a finite number");
      return item as Item;
    });
  }
}

/** `{y: x²}` for each item, after 10 ms of waiting (a model's run), so that kills catch batches in flight. */
export class Compute extends Worker {
  async forward(items: Item[]): Promise<unknown[]> {
    if (items.some((item) => item.exit === "compute")) process.exit(1);
    await new Promise((resolve) => setTimeout(resolve, 10));
    return items.map((item) => ({ y: item.x * item.x, batch: items.length }));
  }
}

const server = new Server();
server.appendWorker(Parse, { route: "/chaos/work", num: 2, maxBatchSize: 8, maxWaitMs: 2, isolation });
server.appendWorker(Compute, { route: "/chaos/work", num: 2, maxBatchSize: 8, maxWaitMs: 2, isolation });
await server.run();
