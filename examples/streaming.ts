/**
 * Two streaming routes: `/count`, a Worker whose forward() is an async generator, and `/spell`,
 * a StepWorker whose requests join and leave between steps (docs/streaming.md).
 */
import { z } from "zod";
import { Server, StepWorker, Worker, type RequestMeta } from "shoal";

/** Counts to `n`, a chunk every `everyMs`, and stops as soon as the client is gone. */
export class Count extends Worker {
  static override input = z.object({ n: z.number().int().min(0).max(1000), everyMs: z.number().min(0).max(10_000).default(100) });
  static override streaming = true;

  async *forward(req: { n: number; everyMs: number }, meta: RequestMeta) {
    for (let i = 1; i <= req.n && !meta.signal?.aborted; i++) {
      await new Promise((resolve) => setTimeout(resolve, req.everyMs));
      yield { i };
    }
  }
}

/** Spells a word, a letter a step: every word under way takes each step together. */
export class Spell extends StepWorker<{ word: string }, { word: string; at: number }, { letter: string; of: number }> {
  static override input = z.object({ word: z.string().min(1).max(100) });

  join(inputs: { word: string }[]) {
    return inputs.map(({ word }) => ({ word, at: 0 }));
  }

  async step(active: { word: string; at: number }[]) {
    await new Promise((resolve) => setTimeout(resolve, 50)); // a model's step would take this long
    return active.map((seq) => ({ chunk: { letter: seq.word[seq.at++]!, of: active.length }, done: seq.at >= seq.word.length }));
  }
}

const server = new Server();
server.appendWorker(Count, { route: "/count" });
server.appendWorker(Spell, { route: "/spell", maxActive: 16 });
server.run();
