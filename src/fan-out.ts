/**
 * Fan-out: a stage's `forward()` turns one item into several sub-items that travel through the
 * next stages as items of their own, and are gathered back, in order, before the stage that
 * declares `gather: true` (or at the route's end). See docs/pipelines.md.
 */

// A symbol of the global registry, so that a marker made by one copy of the package (the user's
// import) is known by another (the worker's runner), as `instanceof` across copies would not be.
const FAN_OUT: unique symbol = Symbol.for("shoal.fanOut") as never;

/** What {@link fanOut} returns: the sub-items of one item, in order. */
export interface FanOut<T = unknown> {
  readonly [FAN_OUT]: true;
  /** The sub-items' values, each the next stage's input. */
  readonly values: readonly T[];
}

/**
 * Returned by `forward()` for an item (at its index of a batch): the item becomes one sub-item
 * per value, each the next stage's input, batched there with other items and other requests'
 * sub-items, with the request's deadline and cancellation. The stage declares it in its options
 * (`fanOut: { max }`, the most sub-items of one item); the stage that declares `gather: true`
 * receives, for the item, the array of its sub-items' outputs in order. Zero values are allowed:
 * the gathering stage then receives `[]`.
 *
 * @example
 * ```ts
 * class Split extends Worker {
 *   forward(req: { text: string }) {
 *     return fanOut(req.text.split(" "));
 *   }
 * }
 * server.appendWorker(Split, { route: "/upper", fanOut: { max: 64 } });
 * server.appendWorker(Upper, { route: "/upper", maxBatchSize: 16 });
 * server.appendWorker(Join, { route: "/upper", gather: true });
 * ```
 */
export function fanOut<T>(values: Iterable<T> | ArrayLike<T>): FanOut<T> {
  if (values === null || typeof values !== "object") throw new TypeError("fanOut() takes an array (or an iterable) of the sub-items' values");
  return { [FAN_OUT]: true, values: Array.isArray(values) ? values : Array.from(values) };
}

/** Whether a `forward()` output is a {@link fanOut} marker. */
export function isFanOut(value: unknown): value is FanOut {
  return typeof value === "object" && value !== null && (value as Partial<FanOut>)[FAN_OUT] === true;
}
