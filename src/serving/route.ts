import type { Stage } from "../scheduling/stage.js";

/** An HTTP route and the ordered stages of its pipeline. */
export interface Route {
  readonly path: string;
  readonly stages: readonly Stage[];
}
