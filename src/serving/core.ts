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

/**
 * A door onto the serving core beside the HTTP door (gRPC; a Kafka or WebSocket one after it), as
 * the assembly starts and stops it: a new door is a folder whose door this is, made with a
 * {@link ServingCore}, and one line in `app/assembly.ts` that adds it to the doors.
 */
export interface Door {
  /** Starts taking calls once the HTTP door listens; rejects with a one-line reason when it cannot (its port is taken). */
  start(): Promise<void>;
  /** The drain has begun (the admission refuses new requests already): stop taking new calls where the protocol has a word for it. */
  drain(): void;
  /** Closes it: after the drain and the pools, or when start-up fails. */
  close(): void | Promise<void>;
  /** Every worker is ready and has said what it serves. */
  ready(): void;
}
