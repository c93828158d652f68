/**
 * The models the examples and tests serve: where each comes from, how it is made, and the
 * SHA-256 of every file it makes. A file whose hash differs from the one here is refused, so a
 * changed package or converter is noticed rather than served.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { convertDracula } from "./dracula-sentiment.js";

/** One model: its files in `models/<name>/` and how to make them. */
export interface ModelRecipe {
  name: string;
  /** One line: what the model is and where it comes from (the licences are in NOTICE). */
  description: string;
  /** Each file the recipe writes, with its SHA-256 (hex). */
  files: Record<string, string>;
  /** Writes the files into `dir` (an empty folder). */
  build(dir: string): Promise<void> | void;
}

export const MODELS: readonly ModelRecipe[] = [
  {
    name: "sentiment",
    description: "dracula-sentiment 1.1.1 (npm): character-level BiLSTM, converted to ONNX",
    files: {
      "sentiment.onnx": "fbdf578a1860741ffd1f4b72b79e1fa7dcf1813929af4ac10c7b0440ef8fab99",
      "vocabulary.json": "1f60ac25453c7f28d1c92a4cb2759c36bc91d45262e9fa6428eb65ae7daea7bd",
    },
    build(dir) {
      const { model, vocabulary } = convertDracula();
      writeFileSync(join(dir, "sentiment.onnx"), model);
      writeFileSync(join(dir, "vocabulary.json"), JSON.stringify(vocabulary));
    },
  },
];

/** The recipe named `name`; throws, listing the names, when there is none. */
export function recipe(name: string): ModelRecipe {
  const found = MODELS.find((m) => m.name === name);
  if (found === undefined) throw new Error(`no model '${name}'; the models are ${MODELS.map((m) => m.name).join(", ")}`);
  return found;
}
