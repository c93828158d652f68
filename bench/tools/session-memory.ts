/**
 * Resident memory per onnxruntime-node session, under different session options: where the
 * memory of a model on the shared pool goes beyond its weights.
 *
 *   node --import tsx bench/tools/session-memory.ts [--sessions 10] bench/.cache/models/mlp00/mlp00.onnx ...
 *
 * For each variant, a fresh child process creates `--sessions` sessions (cycling over the model
 * files given), runs one row through each, and reports the RSS growth per session after the
 * first. Shoal's ONNX runtime uses the "shoal" variant's options. Run it with and without
 * `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=262144` (what `shoal serve` sets, see
 * src/workers/allocator.ts) to see how much of the growth is glibc's heap rather than the session.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const VARIANTS: Record<string, Record<string, unknown>> = {
  shoal: {},
  "no CPU arena": { enableCpuMemArena: false },
  "no prepacking": { extra: { session: { disable_prepacking: "1" } } },
  "no arena, no prepacking": { enableCpuMemArena: false, extra: { session: { disable_prepacking: "1" } } },
  "no memory pattern": { enableMemPattern: false },
  "initializers not in the arena": { extra: { session: { use_device_allocator_for_initializers: "1" } } },
  "no graph optimisation": { graphOptimizationLevel: "disabled" },
};

async function child(variant: string, count: number, files: string[]): Promise<void> {
  const ort = await import("onnxruntime-node");
  const rss = () => process.memoryUsage().rss;
  const sessions = [];
  const after: number[] = [];
  for (let i = 0; i < count; i++) {
    const s = await ort.InferenceSession.create(files[i % files.length]!, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      graphOptimizationLevel: "all",
      executionMode: "sequential",
      ...VARIANTS[variant],
    } as never);
    const meta = s.inputMetadata[0] as unknown as { name: string; shape: (number | string)[] };
    const width = meta.shape.slice(1).reduce<number>((a, d) => a * (typeof d === "number" ? d : 1), 1);
    await s.run({ [meta.name]: new ort.Tensor("float32", new Float32Array(width), [1, width]) });
    sessions.push(s);
    after.push(rss());
  }
  process.stdout.write(JSON.stringify({ first: after[0], perSession: (after.at(-1)! - after[0]!) / (count - 1) }) + "\n");
}

const { values, positionals } = parseArgs({ options: { sessions: { type: "string", default: "10" }, child: { type: "string" } }, allowPositionals: true });
const count = Number(values.sessions);
if (values.child !== undefined) await child(values.child, count, positionals);
else {
  const MiB = (b: number) => (b / 1024 / 1024).toFixed(1);
  for (const variant of Object.keys(VARIANTS)) {
    const r = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--child", variant, "--sessions", String(count), ...positionals], { encoding: "utf8" });
    if (r.status !== 0) {
      process.stdout.write(`${variant}: failed: ${r.stderr.trim().split("\n").at(-1)}\n`);
      continue;
    }
    const { first, perSession } = JSON.parse(r.stdout) as { first: number; perSession: number };
    process.stdout.write(`${variant.padEnd(30)} +${MiB(perSession)} MiB per session (RSS ${MiB(first)} MiB with one)\n`);
  }
}
