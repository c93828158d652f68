/**
 * Streams a completion to stdout, token by token, without a server:
 *
 *   node --import tsx examples/generate/generate.ts <model-dir> "Once upon a time" [max-tokens] [temperature]
 *
 * Then prints the finish reason and the token counts.
 */
import { load } from "./tiny-gpt.js";

const [dir = "models/tiny-gpt", prompt = "Once upon a time", maxTokens = "32", temperature = "0"] = process.argv.slice(2);
const model = await load(dir);
const [sequence] = await model.begin([model.tokenize(prompt)], { maxTokens: Number(maxTokens), temperature: Number(temperature) });
process.stdout.write(prompt);
for (let done = false; !done; ) {
  const [result] = await model.step([sequence!]);
  process.stdout.write(result!.text);
  done = result!.done;
}
process.stdout.write(`\n[finish_reason: ${sequence!.finishReason}, prompt_tokens: ${sequence!.promptTokens}, completion_tokens: ${sequence!.completionTokens}]\n`);
await model.close();
