/**
 * One level of a `shoal bench` sweep, measured: a closed loop of `concurrency` requests at a time
 * or an open loop of `rate` Poisson arrivals a second, in windows until the last three agree (or
 * the cap), with the server's own batch sizes and queue waits over those three when it says them.
 */
import { seeded } from "./inputs.js";
import { closedLoop, openLoop, summarise, type LoadResult, type Samples, type Send } from "./loadgen.js";
import { stageDelta, type StageTotals } from "./prometheus-text.js";
import { stable, STABLE_WINDOWS } from "./stability.js";

/** A level of a sweep. */
export interface Level {
  mode: "concurrency" | "rate";
  value: number;
}

/** What a level measured. */
export interface LevelResult extends LoadResult, Level {
  /** Windows measured, the three summarised among them. */
  windows: number;
  /** Whether the last three agreed before the cap. */
  stable: boolean;
  /** The server's mean batch size and queue wait over the summarised windows (NaN when it did not say). */
  batchSize: number;
  queueMs: number;
}

/** How levels are measured. */
export interface LevelOptions {
  windowSec: number;
  /** How far the windows may differ, as a fraction (0.1: 10 %). */
  tolerance: number;
  maxWindows: number;
  /** Reads the server's totals (undefined: it has none). */
  readServer?: () => Promise<StageTotals | undefined>;
  /** Told what is being measured, after each window. */
  progress?: (level: Level, window: number, last: LoadResult) => void;
  seed?: number;
}

/** Measures one level with `send`. */
export async function measureLevel(send: Send, level: Level, o: LevelOptions): Promise<LevelResult> {
  const load = level.mode === "concurrency" ? closedLoop(send, level.value) : openLoop(send, level.value, seeded(o.seed ?? 1));
  const read = async () => (o.readServer === undefined ? undefined : o.readServer().catch(() => undefined));
  const readings: (StageTotals | undefined)[] = [await read()];
  const windows: Samples[] = [];
  const figures: LoadResult[] = [];
  while (windows.length < Math.max(o.maxWindows, STABLE_WINDOWS)) {
    await new Promise((resolve) => setTimeout(resolve, o.windowSec * 1000));
    const window = load.window();
    windows.push(window);
    figures.push(window.summary());
    readings.push(await read());
    o.progress?.(level, windows.length, figures.at(-1)!);
    if (stable(figures, o.tolerance)) break;
  }
  // What is still in flight is answered, not counted.
  await load.stop();
  const kept = windows.slice(-STABLE_WINDOWS);
  const before = readings.at(-STABLE_WINDOWS - 1);
  const after = readings.at(-1);
  const server = before !== undefined && after !== undefined ? stageDelta(before, after) : { batchSize: NaN, queueMs: NaN };
  return { ...summarise(kept), ...level, windows: windows.length, stable: stable(figures, o.tolerance), ...server };
}

/**
 * The levels of a sweep as written on the command line: a list (`1,4,16`), a range that doubles
 * (`1:64`: 1, 2, 4, ... 64, the last one always included), or a range with a step (`10:50:10`).
 */
export function parseLevels(text: string): number[] {
  const bad = () => new Error(`'${text}' is not a list of levels (1,4,16), a doubling range (1:64) or a range with a step (10:50:10)`);
  const number = (s: string) => {
    const v = Number(s);
    if (!Number.isFinite(v) || v <= 0) throw bad();
    return v;
  };
  const range = /^([\d.]+):([\d.]+)(?::([\d.]+))?$/.exec(text.trim());
  if (range === null) return text.split(",").map((s) => number(s.trim()));
  const [from, to] = [number(range[1]!), number(range[2]!)];
  if (to < from) throw bad();
  const step = range[3] === undefined ? undefined : number(range[3]);
  const levels: number[] = [];
  for (let v = from; v <= to * (1 + 1e-9); v = step === undefined ? v * 2 : v + step) levels.push(+v.toPrecision(12));
  if (levels.at(-1)! < to) levels.push(to);
  return levels;
}
