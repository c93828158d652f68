/**
 * What a step costs with the batch's size: how much cheaper one run for many sequences is than a
 * run per sequence, which is what continuous batching gains. Times are the best of several runs;
 * on a shared machine they move, so read them as orders of magnitude.
 *
 *   node --import tsx examples/generate/step-costs.ts [model-dir]
 *
 * Without a folder, the stand-in model is written to a temporary one.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTinyGpt } from "./make-model.js";
import { load } from "./tiny-gpt.js";

const temporary = process.argv[2] === undefined ? mkdtempSync(join(tmpdir(), "tiny-gpt-")) : undefined;
const dir = process.argv[2] ?? makeTinyGpt(temporary!).dir;
const model = await load(dir);
const best = async (runs: number, f: () => Promise<unknown>) => {
  let fastest = Infinity;
  for (let r = 0; r < runs; r++) {
    const start = performance.now();
    await f();
    fastest = Math.min(fastest, performance.now() - start);
  }
  return fastest.toFixed(2);
};
console.log("| past | batch | prefill (ms) | step, same batch as last (ms) | step, batch changed (ms) | a step per sequence (ms) |");
console.log("| ---: | ---: | ---: | ---: | ---: | ---: |");
for (const past of [64, 256]) {
  const prompt = model.tokenize("Once upon a time there was a small fish who wanted to see the whole ocean. ".repeat(40)).slice(0, past);
  for (const batch of [1, 8, 32, 64]) {
    const prompts = Array.from({ length: batch }, () => prompt);
    const prefill = await best(3, () => model.begin(prompts, { maxTokens: 1000 }));
    const sequences = await model.begin(prompts, { maxTokens: 1000 });
    const same = await best(20, () => model.step(sequences));
    const reversed = [...sequences].reverse();
    let flip = false;
    const changed = await best(20, () => model.step((flip = !flip) ? reversed : sequences));
    const each = await best(5, async () => {
      for (const s of sequences) await model.step([s]);
    });
    console.log(`| ${past} | ${batch} | ${prefill} | ${same} | ${changed} | ${each} |`);
  }
}
await model.close();
if (temporary !== undefined) rmSync(temporary, { recursive: true, force: true });
