/**
 * Type-level tests of typed() and typedBatch(): checked by `tsc` (test/types.test.ts), never run.
 * Each `@ts-expect-error` line must be an error, or tsc fails on the unused directive.
 */
import { z } from "zod";
import { fanOut, Server, typed, typedBatch, type RequestMeta } from "shoal";

const Input = z.object({ x: z.number(), tags: z.array(z.string()).default([]) });
const Output = z.object({ y: z.number() });
type Input = z.infer<typeof Input>;

// The right types: forward() takes the parsed input (defaults filled in) and returns the output.
export class Exp extends typed(Input, Output) {
  override example = { x: 1 }; // an input: `tags` may be left out, its default applies
  forward(req: Input, meta: RequestMeta) {
    const tags: string[] = req.tags;
    return { y: Math.exp(req.x) + tags.length + meta.deadline * 0 };
  }
}

export class AsyncExp extends typed(Input, Output) {
  async forward(req: Input) {
    return { y: req.x };
  }
}

export class WrongParameter extends typed(Input, Output) {
  // @ts-expect-error x is a number, not a string
  forward(req: { x: string }) {
    return { y: Number(req.x) };
  }
}

export class WrongResult extends typed(Input, Output) {
  // @ts-expect-error y must be a number
  forward(req: Input) {
    return { y: String(req.x) };
  }
}

export class MissingField extends typed(Input, Output) {
  // @ts-expect-error the result lacks y
  forward(_req: Input) {
    return { z: 1 };
  }
}

export class WrongExample extends typed(Input, Output) {
  // @ts-expect-error the example must be an input
  override example = { x: "1" };
  forward(req: Input) {
    return { y: req.x };
  }
}

// A stage that fans out returns its sub-items, each an output.
export class Spread extends typed(Input, Output) {
  forward(req: Input) {
    return fanOut(req.tags.map((tag) => ({ y: tag.length })));
  }
}

export class SpreadBatch extends typedBatch(Input, Output) {
  forward(reqs: Input[]) {
    return reqs.map((req) => (req.x < 0 ? new Error("negative") : fanOut([{ y: req.x }])));
  }
}

export class SpreadWrong extends typed(Input, Output) {
  // @ts-expect-error each sub-item must be an output
  forward(req: Input) {
    return fanOut(req.tags);
  }
}

// Without an output schema, forward() may return anything.
export class NoOutput extends typed(Input) {
  forward(req: Input) {
    return req.tags;
  }
}

// Batches: arrays in, one output or Error per item out.
export class Batch extends typedBatch(Input, Output) {
  forward(reqs: Input[], metas: RequestMeta[]) {
    return reqs.map((req, i) => (req.x < 0 ? new Error(`item ${i} of ${metas.length}`) : { y: req.x }));
  }
}

export class BatchOfOne extends typedBatch(Input, Output) {
  // @ts-expect-error a batch Worker takes arrays
  forward(req: Input) {
    return [{ y: req.x }];
  }
}

export class BatchWrongResult extends typedBatch(Input, Output) {
  // @ts-expect-error each result must be an output
  forward(reqs: Input[]) {
    return reqs.map((req) => ({ y: `${req.x}` }));
  }
}

// The schemas are static members the server reads; the classes are Workers it accepts.
const schema: typeof Input = Exp.input;
const batched: boolean = Batch.batched;
void schema;
void batched;
const server = new Server();
server.appendWorker(Exp).appendWorker(Batch, { maxBatchSize: 8 });
// @ts-expect-error an abstract typed base is not a Worker to serve
server.appendWorker(typed(Input, Output));
