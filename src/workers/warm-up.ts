import { isFanOut } from "../fan-out.js";
import type { Schema } from "../schema.js";
import type { RequestMeta } from "../worker.js";
import { isAsyncIterable } from "./item-stream.js";
import type { RunnerIdentity } from "./messages.js";

/**
 * Runs a Worker's declared examples through `forward` before it takes work, in batches when the
 * stage batches, checking them against the input schema and their results (a streaming Worker's:
 * every chunk; a fanned-out result's: every sub-item) against the output schema. A failure stops
 * the worker from starting, with a message that names the worker and the example. Resolves with
 * the first example as `forward` received it (parsed), for `--dry-run`.
 */
export async function warmUp(
  examples: unknown[],
  boot: RunnerIdentity,
  schemas: { input: Schema | undefined; output: Schema | undefined },
  forward: (inputs: unknown[], metas: RequestMeta[]) => Promise<unknown[]>,
): Promise<unknown> {
  const size = boot.maxBatchSize;
  let first: unknown;
  for (let i = 0; i < examples.length; i += size) {
    const declared = examples.slice(i, i + size);
    const metas = declared.map(() => ({ requestId: "warm-up", headers: {}, deadline: Infinity, route: "", signal: new AbortController().signal }));
    const which = declared.length === 1 ? `example ${i + 1}` : `examples ${i + 1}-${i + declared.length}`;
    const fail = (why: string) => new Error(`warm-up of ${boot.stageName} worker ${boot.workerId} failed on ${which} of ${examples.length} (${preview(declared[0])}): ${why}`);
    const chunk = await conforming(schemas.input, declared).catch((err: Error) => {
      throw fail(`an example does not match the input schema: ${err.message}`);
    });
    if (i === 0) first = chunk[0];
    const why = (err: unknown) => fail(err instanceof Error ? err.message : String(err));
    let outputs = await forward(chunk, metas).catch((err: unknown) => {
      throw why(err);
    });
    if (!Array.isArray(outputs) || outputs.length !== chunk.length) throw fail(`forward() did not return one result per example`);
    outputs = (
      await Promise.all(outputs.map(drained)).catch((err: unknown) => {
        throw why(err);
      })
    ).flat();
    const error = outputs.find((out): out is Error => out instanceof Error);
    if (error !== undefined) throw fail(error.message);
    await conforming(schemas.output, outputs).catch((err: Error) => {
      throw fail(`a result does not match the output schema: ${err.message}`);
    });
  }
  return first;
}

// A streamed result's chunks (each checked as a result), a fanned-out result's sub-items (each
// checked as a result), or the result itself in a list of one.
async function drained(output: unknown): Promise<unknown[]> {
  if (isFanOut(output)) return [...output.values];
  if (!isAsyncIterable(output)) return [output];
  const chunks: unknown[] = [];
  for await (const chunk of output) chunks.push(chunk);
  return chunks;
}

// The values parsed by `schema`, or the values themselves when there is none (schema.js, and zod
// with it, is loaded only for a schema). Rejects with the first failure.
async function conforming(schema: Schema | undefined, values: unknown[]): Promise<unknown[]> {
  if (schema === undefined) return values;
  const { parseItem } = await import("../schema.js");
  return Promise.all(values.map((value) => parseItem(schema, value)));
}

function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
