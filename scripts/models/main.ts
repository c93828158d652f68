/**
 * `npm run models [name...]`: makes every model of the catalogue (or those named) in `models/`,
 * checking each file's SHA-256, and copies NOTICE there. Models already made are only checked.
 */
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { MODELS } from "./catalog.js";
import { ensureModel } from "./ensure-model.js";
import { modelsDir } from "./models-dir.js";

const names = process.argv.slice(2);
const root = modelsDir();
try {
  for (const name of names.length > 0 ? names : MODELS.map((m) => m.name)) {
    const started = performance.now();
    const { dir, built } = await ensureModel(name, root);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`${name}: ${built ? `made in ${seconds} s` : "up to date"} (${dir})`);
  }
  copyFileSync(new URL("NOTICE", import.meta.url), join(root, "NOTICE"));
} catch (err) {
  console.error((err as Error).message);
  process.exitCode = 1;
}
