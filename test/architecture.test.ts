/**
 * The shape of src/, read from the source text: the folders (and the folders of a door one level
 * deeper) form layers that import downward only (type imports included), siblings that must not
 * know each other never do, the serving core imports no transport, no two files import each other
 * even through others, and no file grows past what one reads at a sitting.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join, posix, relative, sep } from "node:path";
import { describe, test } from "node:test";
import ts from "typescript";
import { ROOT } from "./helpers.js";

const SRC = join(ROOT, "src");

/**
 * The layers, top first. An entry ending in "/" is a folder of src/ and everything under it that
 * no deeper entry claims (`http/` is the runtime-neutral HTTP files, `http/node/` one runtime's);
 * any other is a file at the root of src/. A file may import its own unit, a unit of its own
 * layer, or one below; never one above. A unit listed with no file yet (a folder still to come)
 * is simply absent; a folder or root file of src/ missing here fails the first test below.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["cli/", "index.ts"],
  // `shoal bench`'s load generation and reports, on the client.
  ["bench/"],
  // `shoal/client/grpc` and `shoal/client`: a client of the server, sharing only its pure pieces (CLIENT_SHARES).
  ["client/grpc/"],
  ["client/"],
  // The composition root: the Server façade, the assembly, the runtime's choice, signals.
  ["app/"],
  // The doors: the dialects spoken over HTTP, and gRPC.
  ["apis/v2/", "apis/openai/", "apis/mosec/", "grpc/"],
  // The HTTP door's runtimes, on its runtime-neutral files.
  ["http/node/", "http/bun/"],
  ["http/fetch/"],
  ["http/"],
  // The protocol-neutral core every door enters.
  ["serving/"],
  ["models/"],
  ["scheduling/"],
  // The workers, and a stage of Python workers (python.ts) as one of their kinds.
  ["workers/", "python.ts"],
  // `shoal/onnx` and `shoal/llama`: Workers of the public API, for ONNX and GGUF models.
  ["onnx/", "llama/"],
  // The public API a user's Worker is written against.
  ["worker.ts", "typed-worker.ts", "step-worker.ts", "text-generation.ts", "text-stream.ts", "embeddings.ts", "model-worker.ts", "schema.ts", "codecs.ts", "stage-options.ts", "fan-out.ts", "config.ts", "flag-values.ts", "logger.ts"],
  // What that API is built on: tensors, the V2 codec, metric objects.
  ["v2/", "tensor/", "metrics/"],
  ["errors.ts", "limits.ts"],
];

const MAX_LINES = 350;

/** Paths relative to src/, with "/" whatever the platform. */
function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? sourceFiles(path) : [relative(SRC, path).split(sep).join("/")];
  });
}

const RANK = new Map(LAYERS.flatMap((units, rank) => units.map((unit) => [unit, rank] as const)));

/**
 * Units that must not know each other though the layers would allow it, each with the units it
 * never imports: gRPC never the HTTP door nor its dialects, one dialect never another, one
 * runtime never another, node:http never the Fetch-API adapter.
 */
const NEVER: ReadonlyMap<string, readonly string[]> = new Map([
  ["grpc/", ["http/", "http/node/", "http/bun/", "http/fetch/", "apis/v2/", "apis/openai/", "apis/mosec/"]],
  ["apis/v2/", ["apis/openai/", "apis/mosec/", "grpc/"]],
  ["apis/openai/", ["apis/v2/", "apis/mosec/", "grpc/"]],
  ["apis/mosec/", ["apis/v2/", "apis/openai/", "grpc/"]],
  ["http/node/", ["http/bun/", "http/fetch/"]],
  ["http/bun/", ["http/node/"]],
]);

/**
 * What the client may import of the rest of src/, each of its units: the tensor core, the V2
 * codec and the error table its codec throws from; its gRPC side also its HTTP side, and the
 * gRPC door's `.proto` loading and messages. Nothing that serves.
 */
const CLIENT_SHARES: ReadonlyMap<string, RegExp> = new Map([
  ["client/", /^(v2\/|tensor\/|errors\.ts$|limits\.ts$)/],
  ["client/grpc/", /^(client\/|v2\/|tensor\/|errors\.ts$|limits\.ts$|grpc\/(protos|messages)\.ts$)/],
]);

/** The entry of the client's HTTP side, which runs in browsers: nothing it reaches imports a built-in module of Node.js or gRPC. */
const BROWSER_ENTRY = "client/index.ts";
const NOT_IN_BROWSERS = (name: string) => name.startsWith("node:") || builtinModules.includes(name) || /^@grpc\/|^grpc-/.test(name);

/** Modules a unit of the serving core never imports: it speaks no transport. */
const TRANSPORTS = /^(node:)?(http|http2|https|net)$|^@grpc\//;

/**
 * The only files that make a task: the core's entry, the dry run that runs routes without a door,
 * and the fan-out, whose sub-items are tasks of their own under an admitted one.
 */
const TASK_MAKERS = /^(serving\/|app\/dry-run\.ts$|scheduling\/sub-items\.ts$)/;

/** The unit a file of src/ belongs to: the deepest folder of LAYERS that holds it ("http/node/"), or itself at the root. */
function unitOf(file: string): string {
  const parts = file.split("/");
  for (let depth = parts.length - 1; depth > 0; depth--) {
    const folder = `${parts.slice(0, depth).join("/")}/`;
    if (RANK.has(folder)) return folder;
  }
  return parts.length === 1 ? file : `${parts[0]}/`;
}

/** One import of a file of src/ from another: relative specifiers only, `.js` read as the `.ts` it is built from. */
interface Import {
  readonly from: string;
  readonly to: string;
}

/** The packages and built-in modules each file imports (bare specifiers), type imports included. */
function packages(files: readonly string[]): { from: string; name: string }[] {
  return files
    .filter((file) => file.endsWith(".ts"))
    .flatMap((from) =>
      ts
        .preProcessFile(readFileSync(join(SRC, from), "utf8"), true, true)
        .importedFiles.map((imported) => imported.fileName)
        .filter((specifier) => !specifier.startsWith("."))
        .map((name) => ({ from, name })),
    );
}

/**
 * Every relative import of the TypeScript files of src/: static, dynamic, `import type`,
 * `export … from`. TypeScript's own scanner reads them, so comments and strings do not fool it.
 */
function imports(files: readonly string[]): Import[] {
  return files
    .filter((file) => file.endsWith(".ts"))
    .flatMap((from) => {
      const text = readFileSync(join(SRC, from), "utf8");
      return ts
        .preProcessFile(text, true, true)
        .importedFiles.map((imported) => imported.fileName)
        .filter((specifier) => specifier.startsWith("."))
        .map((specifier) => ({ from, to: posix.join(posix.dirname(from), specifier).replace(/\.js$/, ".ts") }));
    });
}

function describeImport({ from, to }: Import): string {
  return `src/${from} → src/${to}`;
}

/**
 * The cycles between units: for each import from one unit to another that leads back to it, the
 * shortest way back. Each cycle is listed once, from its first unit in sort order.
 */
function cycles(edges: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const targets = (unit: string) => [...(edges.get(unit) ?? [])].sort();
  // The shortest path from `from` to `to`, both included, or undefined when there is none.
  const shortest = (from: string, to: string): string[] | undefined => {
    const previous = new Map<string, string>([[from, from]]);
    for (const queue = [from]; queue.length > 0; ) {
      const unit = queue.shift()!;
      if (unit === to) {
        const path = [to];
        while (path[0] !== from) path.unshift(previous.get(path[0]!)!);
        return path;
      }
      for (const next of targets(unit)) {
        if (previous.has(next)) continue;
        previous.set(next, unit);
        queue.push(next);
      }
    }
    return undefined;
  };
  const found = new Map<string, string[]>();
  for (const from of [...edges.keys()].sort()) {
    for (const to of targets(from)) {
      const back = shortest(to, from);
      if (back === undefined) continue;
      const loop = [from, ...back.slice(0, -1)];
      const first = loop.indexOf([...loop].sort()[0]!);
      const cycle = [...loop.slice(first), ...loop.slice(0, first)];
      found.set(cycle.join(" "), [...cycle, cycle[0]!]);
    }
  }
  return [...found.values()];
}

describe("the architecture of src/", () => {
  const files = sourceFiles();
  const all = imports(files);
  const edges = all.filter((edge) => unitOf(edge.from) !== unitOf(edge.to));

  test("every folder and root file of src/ has a place in the layers", () => {
    const unplaced = [...new Set(files.map(unitOf))].filter((unit) => !RANK.has(unit)).sort();
    assert.deepEqual(unplaced, [], `not in LAYERS of test/architecture.test.ts, so not checked: ${unplaced.map((u) => `src/${u}`).join(", ")}`);
  });

  test("no import cycle between folders, type imports included", () => {
    const graph = new Map<string, Set<string>>();
    for (const { from, to } of edges) {
      const targets = graph.get(unitOf(from)) ?? new Set<string>();
      targets.add(unitOf(to));
      graph.set(unitOf(from), targets);
    }
    const loops = cycles(graph);
    const found = loops.map((cycle) => cycle.join(" → ")).sort();
    // The imports behind each step of a cycle, once per pair of units.
    const pairs = new Set(loops.flatMap((cycle) => cycle.slice(1).map((to, i) => `${cycle[i]} ${to}`)));
    const behind = [...pairs].sort().map((pair) => {
      const [from, to] = pair.split(" ");
      const via = edges.filter((e) => unitOf(e.from) === from && unitOf(e.to) === to);
      return `  ${from} → ${to}:\n${via.map((e) => `    ${describeImport(e)}`).join("\n")}`;
    });
    assert.deepEqual(found, [], `${found.length} import cycle(s) between folders of src/:\n${found.map((c) => `  ${c}`).join("\n")}\nthrough these imports:\n${behind.join("\n")}`);
  });

  test("no import cycle between files, type imports included", () => {
    const graph = new Map<string, Set<string>>();
    for (const { from, to } of all) {
      const targets = graph.get(from) ?? new Set<string>();
      targets.add(to);
      graph.set(from, targets);
    }
    const found = cycles(graph).map((cycle) => cycle.map((file) => `src/${file}`).join(" → ")).sort();
    assert.deepEqual(found, [], `${found.length} import cycle(s) between files of src/:\n${found.map((c) => `  ${c}`).join("\n")}`);
  });

  test("folders import downward only, type imports included", () => {
    const upward = edges.filter(({ from, to }) => {
      const [fromRank, toRank] = [RANK.get(unitOf(from)), RANK.get(unitOf(to))];
      return fromRank !== undefined && toRank !== undefined && toRank < fromRank;
    });
    const layers = LAYERS.map((units, rank) => `  ${rank}: ${units.join(" ")}`).join("\n");
    assert.deepEqual(
      upward.map(describeImport),
      [],
      `${upward.length} import(s) up the layers (top first):\n${layers}\n${upward.map((e) => `  ${describeImport(e)}`).join("\n")}`,
    );
  });

  test("siblings that must not know each other never import each other", () => {
    const crossing = edges.filter(({ from, to }) => NEVER.get(unitOf(from))?.includes(unitOf(to)) === true);
    assert.deepEqual(crossing.map(describeImport), []);
  });

  test("the client imports nothing of the server but the pieces it shares", () => {
    const taken = edges.filter(({ from, to }) => {
      const shares = CLIENT_SHARES.get(unitOf(from));
      return shares !== undefined && !shares.test(to);
    });
    assert.deepEqual(taken.map(describeImport), []);
  });

  test("the client's HTTP side reaches no module of Node.js nor gRPC, so that it runs in browsers", () => {
    const reached = new Set([BROWSER_ENTRY]);
    for (const queue = [BROWSER_ENTRY]; queue.length > 0; ) {
      const file = queue.shift()!;
      for (const { to } of all.filter((edge) => edge.from === file)) if (!reached.has(to)) queue.push(to), reached.add(to);
    }
    assert.ok(reached.size > 5, `the client's entry ${BROWSER_ENTRY} reaches its files`);
    const found = packages([...reached]).filter(({ name }) => NOT_IN_BROWSERS(name));
    assert.deepEqual(found.map(({ from, name }) => `src/${from} → ${name}`), []);
  });

  test("the serving core imports no transport", () => {
    const transports = packages(files).filter(({ from, name }) => unitOf(from) === "serving/" && TRANSPORTS.test(name));
    assert.deepEqual(transports.map(({ from, name }) => `src/${from} → ${name}`), []);
  });

  test("a task is made only by the serving core (and the dry run)", () => {
    const makers = files.filter((file) => file.endsWith(".ts") && !TASK_MAKERS.test(file) && /\bnew Task\(/.test(readFileSync(join(SRC, file), "utf8")));
    assert.deepEqual(makers.map((file) => `src/${file}`), []);
  });

  test(`no file of src/ over ${MAX_LINES} lines`, () => {
    const long = files
      .map((file) => {
        const text = readFileSync(join(SRC, file), "utf8");
        return { file, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0) };
      })
      .filter(({ lines }) => lines > MAX_LINES)
      .sort((a, b) => b.lines - a.lines);
    const report = long.map(({ file, lines }) => `  src/${file}: ${lines} lines`);
    assert.deepEqual(report, [], `${long.length} file(s) over ${MAX_LINES} lines:\n${report.join("\n")}`);
  });

  // Guards the reading above: an import resolved wrongly would drop out of every check silently.
  test("every relative import names a file of src/", () => {
    const known = new Set(files);
    const dangling = all.filter(({ to }) => !known.has(to) && !to.startsWith("../"));
    assert.deepEqual(dangling.map(describeImport), []);
  });
});
