import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
/** Where export.py writes the ONNX model and the held-out images (git-ignored). */
export const MODEL_DIR = join(HERE, "..", "..", "models", "digits");

/** The Python that trains and exports the model, and runs the Python stage: `$SHOAL_PYTHON`, else `python3`. */
export const PYTHON = process.env.SHOAL_PYTHON ?? "python3";

/** The exported model's path. */
export function modelFile(): string {
  return join(MODEL_DIR, "digits.onnx");
}

/**
 * Trains and exports the model once (export.py, with scikit-learn and skl2onnx installed in
 * {@link PYTHON}); true when it was made now.
 */
export function ensureExported(): boolean {
  if (existsSync(modelFile())) return false;
  execFileSync(PYTHON, [join(HERE, "export.py"), MODEL_DIR], { stdio: ["ignore", "ignore", "inherit"] });
  return true;
}
