/**
 * Makes a model's files on first use and checks them every time: each file of a recipe is kept in
 * `models/<name>/` (git-ignored), made by its recipe when missing or not what the catalogue says,
 * and refused when the recipe makes something else.
 */
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { recipe, type ModelRecipe } from "./catalog.js";
import { modelsDir } from "./models-dir.js";

/** The hex SHA-256 of a file. */
export function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** Which of the recipe's files in `dir` are missing or differ from the catalogue (none: all good). */
function stale(model: ModelRecipe, dir: string): string[] {
  return Object.entries(model.files)
    .filter(([file, hash]) => !existsSync(join(dir, file)) || sha256(join(dir, file)) !== hash)
    .map(([file]) => file);
}

/** Where a model's files are, and whether this call made them. */
export interface EnsuredModel {
  dir: string;
  /** Each file's path, by its name in the recipe. */
  files: Record<string, string>;
  built: boolean;
}

/**
 * The model `name`, made if its files are missing or differ from the catalogue. The recipe writes
 * into a fresh folder beside the cache, which replaces the model's folder only once every file has
 * its catalogued hash; otherwise it is removed and this throws, naming each file and both hashes.
 */
export async function ensureModel(name: string, root = modelsDir()): Promise<EnsuredModel> {
  return ensureRecipe(recipe(name), root);
}

/** {@link ensureModel} for a recipe of one's own. */
export async function ensureRecipe(model: ModelRecipe, root = modelsDir()): Promise<EnsuredModel> {
  const name = model.name;
  const dir = join(root, name);
  const files = Object.fromEntries(Object.keys(model.files).map((f) => [f, join(dir, f)]));
  if (stale(model, dir).length === 0) return { dir, files, built: false };
  mkdirSync(root, { recursive: true });
  const work = mkdtempSync(join(root, `.${name}-`));
  chmodSync(work, 0o755);
  try {
    await model.build(work);
    const wrong = stale(model, work);
    if (wrong.length > 0) {
      const lines = wrong.map((f) => `  ${f}: expected ${model.files[f]}, made ${existsSync(join(work, f)) ? sha256(join(work, f)) : "nothing"}`);
      throw new Error(`model '${name}' did not come out as catalogued (scripts/models/catalog.ts):\n${lines.join("\n")}`);
    }
    // Another process may have made it meanwhile (two servers' first start): keep theirs.
    if (stale(model, dir).length > 0) {
      rmSync(dir, { recursive: true, force: true });
      renameSync(work, dir);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { dir, files, built: true };
}
