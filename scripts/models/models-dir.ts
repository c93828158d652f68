/** Where made models are kept, for the code that makes them and the code that serves them. */
import { fileURLToPath } from "node:url";

/** The cache of made models: `models/` at the repository's root, or `$SHOAL_MODELS_DIR`. */
export function modelsDir(): string {
  return process.env.SHOAL_MODELS_DIR || fileURLToPath(new URL("../../models", import.meta.url));
}
