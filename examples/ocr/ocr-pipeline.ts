/**
 * The /ocr route's four stages, for the example server and for the benchmark that measures them
 * with the recogniser's batching taken away. Detect finds the text boxes of each image (images of
 * one size bucket in one run) and fans the image out into one sub-item per box; Angle and
 * Recognise take the boxes of every request in their batches; Lines gathers each image's boxes back.
 */
import type { Server } from "shoal";
import { Angle } from "./angle.js";
import { Detect } from "./detect.js";
import { Lines } from "./lines.js";
import { Recognise } from "./recognise.js";

/** The recogniser's largest batch of boxes by default. */
export const RECOGNISE_BATCH = 32;

/** Appends the stages of /ocr; `recogniser` replaces the Recognise stage (a variant of it). */
export function appendOcrPipeline(server: Server, { recogniser = Recognise, recogniseBatch = RECOGNISE_BATCH }: { recogniser?: typeof Recognise; recogniseBatch?: number } = {}): void {
  server.appendWorker(Detect, { num: 1, maxBatchSize: 4, maxWaitMs: 5, route: "/ocr", fanOut: { max: 256 } });
  server.appendWorker(Angle, { num: 1, maxBatchSize: 16, maxWaitMs: 5, route: "/ocr" });
  server.appendWorker(recogniser, { num: 1, maxBatchSize: recogniseBatch, maxWaitMs: 5, route: "/ocr" });
  server.appendWorker(Lines, { num: 1, route: "/ocr", gather: true });
}
