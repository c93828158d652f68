/**
 * Workers typed by their schemas. TypeScript does not carry a base class's parameter types into
 * an overriding method, so the schemas cannot type `forward()` through inference alone; instead
 * these factories return a base class whose abstract `forward()` is declared with the schemas'
 * types, and TypeScript checks the subclass's `forward()` against it.
 */
import type { z } from "zod";
import type { FanOut } from "./fan-out.js";
import type { Schema } from "./schema.js";
import { Worker, type RequestMeta } from "./worker.js";

type MaybePromise<T> = T | Promise<T>;

/** The statics of a class that {@link typed} or {@link typedBatch} returns. */
export interface WorkerSchemas<I extends Schema, O extends Schema> {
  readonly input: I;
  readonly output: O | undefined;
  readonly batched: boolean;
}

/** The base class {@link typed} returns: `forward()` takes one parsed input item. */
export abstract class ItemWorker<I extends Schema, O extends Schema> extends Worker {
  declare example?: z.input<I>;
  declare examples?: z.input<I>[];
  abstract override forward(req: z.output<I>, meta: RequestMeta): MaybePromise<z.output<O> | FanOut<z.output<O>>>;
}

/**
 * The base class {@link typedBatch} returns: `forward()` takes a batch of parsed input items and
 * returns one output, or an `Error` that fails only that item, per item.
 */
export abstract class BatchWorker<I extends Schema, O extends Schema> extends Worker {
  declare example?: z.input<I>;
  declare examples?: z.input<I>[];
  abstract override forward(reqs: z.output<I>[], metas: RequestMeta[]): MaybePromise<(z.output<O> | FanOut<z.output<O>> | Error)[]>;
}

/**
 * A Worker base class for items of schema `input` and results of schema `output` (zod 4). The
 * first stage of a route parses each request with `input` (422 naming the failing fields),
 * `forward()` is type-checked against both schemas, `example` against `input`, and
 * `/openapi.json` documents the route with them. Declare `forward()`'s parameter with
 * `z.infer<typeof Input>`: a parameter or result of another type is a compile error.
 *
 * @example
 * ```ts
 * const Input = z.object({ x: z.number() });
 * const Output = z.object({ y: z.number() });
 *
 * export class Exp extends typed(Input, Output) {
 *   override example = { x: 1 };
 *   forward(req: z.infer<typeof Input>) {
 *     return { y: Math.exp(req.x) };
 *   }
 * }
 * ```
 */
export function typed<I extends Schema, O extends Schema = z.core.$ZodUnknown>(input: I, output?: O): (abstract new () => ItemWorker<I, O>) & WorkerSchemas<I, O> {
  abstract class Typed extends ItemWorker<I, O> {
    static override readonly input = input;
    static override readonly output = output;
  }
  return Typed;
}

/**
 * Like {@link typed}, for a Worker that computes batches: `forward()` receives an array of
 * 1..maxBatchSize parsed items (always an array, even with `maxBatchSize` 1) and returns an array
 * of the same length and order, where an `Error` fails only its item.
 *
 * @example
 * ```ts
 * const Input = z.object({ text: z.string().min(1) });
 * const Output = z.object({ embedding: z.array(z.number()) });
 *
 * export class Embed extends typedBatch(Input, Output) {
 *   async forward(reqs: z.infer<typeof Input>[]) {
 *     const vectors = await model.embed(reqs.map((r) => r.text));
 *     return vectors.map((embedding) => ({ embedding }));
 *   }
 * }
 * server.appendWorker(Embed, { maxBatchSize: 32, maxWaitMs: 5 });
 * ```
 */
export function typedBatch<I extends Schema, O extends Schema = z.core.$ZodUnknown>(input: I, output?: O): (abstract new () => BatchWorker<I, O>) & WorkerSchemas<I, O> {
  abstract class TypedBatch extends BatchWorker<I, O> {
    static override readonly input = input;
    static override readonly output = output;
    static override readonly batched = true;
  }
  return TypedBatch;
}
