import type { Metrics } from "../metrics/registry.js";
import type { Admission } from "./admission.js";
import type { V2DataPlane } from "./data-plane.js";

/**
 * What a door that serves V2 models is given (gRPC; the REST door reaches the same parts through
 * the HTTP door): the one admission, the V2 data plane, and the metrics its answers count in.
 */
export interface ServingCore {
  readonly admission: Admission;
  readonly plane: V2DataPlane;
  readonly metrics: Metrics;
}
