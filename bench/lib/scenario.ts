/**
 * What a benchmark scenario is: a module in bench/scenarios/ that the runner dispatches to.
 */
import type { ParseArgsConfig } from "node:util";

export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

/** Settings every scenario receives. */
export interface CommonOptions {
  /** Seconds per measured point. */
  durationSec: number;
  /** Measured rounds per point (medians are taken over them). */
  rounds: number;
  /** Warm-up seconds per server before measuring. */
  warmupSec: number;
}

export interface ScenarioContext {
  common: CommonOptions;
  /** The scenario's own flags, parsed. */
  values: Record<string, string | boolean | undefined>;
  /** Repository root (servers are started from here). */
  root: string;
  /** Where results are written. */
  resultsDir: string;
  /** Prints a progress line. */
  log(line: string): void;
}

export interface Scenario {
  name: string;
  /** One line for `--help`. */
  summary: string;
  /** Extra flags, in node:util parseArgs form, with a help text each. */
  options: OptionSpec;
  help: Record<string, string>;
  run(ctx: ScenarioContext): Promise<void>;
}
