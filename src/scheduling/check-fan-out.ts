import type { ResolvedStageOptions } from "../stage-options.js";
import { isJsonType } from "./sub-items.js";

/** What the checks read of a stage of a route. */
export interface FanOutStage {
  readonly name: string;
  readonly options: Pick<ResolvedStageOptions, "fanOut" | "gather">;
}

/**
 * Checks the fan-outs of a route's stages at start-up: every stage that gathers follows one that
 * fans out, a fan-out is gathered before the next one (they do not nest), and a stage that fans
 * out is not the route's last. Returns the stage whose fan-out the route's end gathers, if any.
 * Throws an `Error` that names the route and the stage.
 */
export function checkFanOut(path: string, stages: readonly FanOutStage[]): FanOutStage | undefined {
  let open: FanOutStage | undefined;
  stages.forEach((stage, i) => {
    if (stage.options.gather) {
      if (open === undefined) throw new Error(`route ${path}: stage ${stage.name} gathers (gather: true), but no stage before it fans out`);
      open = undefined;
    }
    if (stage.options.fanOut === undefined) return;
    if (open !== undefined) throw new Error(`route ${path}: stage ${stage.name} fans out before the sub-items of ${open.name} are gathered; fan-outs do not nest, so put a stage with gather: true between them`);
    if (i === stages.length - 1) throw new Error(`route ${path}: stage ${stage.name} fans out at the route's last stage; its sub-items need a stage after it`);
    open = stage;
  });
  return open;
}

/**
 * Checks, once the workers have said what they encode, that a route whose end gathers sub-items
 * (answered as one JSON array of their answers) ends in a stage that encodes JSON. Throws an
 * `Error` that names the route, the stage and what it encodes.
 */
export function checkGatheredAnswers(path: string, stages: readonly (FanOutStage & { readonly contentType: string | undefined })[]): void {
  const open = checkFanOut(path, stages);
  const last = stages.at(-1);
  if (open === undefined || last === undefined || last.contentType === undefined || isJsonType(last.contentType)) return;
  throw new Error(
    `route ${path}: the sub-items of ${open.name} are gathered at the route's end and answered as one JSON array, but its last stage ${last.name} encodes ${last.contentType}; give that stage a JSON codec, or gather them in a stage with gather: true`,
  );
}
