/**
 * Which failures of ONNX Runtime are the client's. A request's tensors can pass every check
 * Shoal makes (names, element types, the shape the graph declares, the element budget) and still
 * be values the graph cannot take: an id outside an embedding table, a recording shorter than a
 * model's window, a size that only an operator inside the graph knows is wrong. ONNX Runtime then
 * fails the run with a message and no error code (onnxruntime-node keeps only the text).
 *
 * A failure is the client's when both hold:
 * - the run held this request's tensors alone: a batch's run of several requests that fails is
 *   split until each request runs alone (src/workers/batch-split.ts), so this says the request
 *   fails where the others of its batch do not;
 * - the message is one of the runtime's verdicts on the values it was given: an operator that
 *   refused them (`Non-zero status code returned while running <Op> node`), or the runtime's own
 *   checks of the inputs against the graph (invalid dimensions or rank, unexpected data type).
 *
 * Anything else stays the server's (500): a failure to allocate memory, whatever the operator, and
 * every other error of the runtime or of the code around it.
 */
import { ClientError } from "../errors.js";
import { formatShape } from "../tensor/shape.js";
import type { TensorValue } from "../tensor/tensor.js";

// An operator failed; a node inside a subgraph (If, Loop, Scan) nests one such prefix in another.
const OPERATOR = /Non-zero status code returned while running (\S+) node\. Name:'([^']*)' Status Message: /g;
// The runtime's checks of the feeds against the graph's inputs; these name the input.
const FEED_CHECK = /^(?:Got invalid dimensions for input|Invalid rank for input|Unexpected input data type)/;
// Out of memory, in any operator: the server's.
const RESOURCE = /alloc|out of memory/i;
// Where in the runtime's source a check failed, and the C++ function it failed in.
const SOURCE = /(?:\/[^\s/:]+)+\.(?:cc|cpp|cxx|c|h|hpp):\d+\s+(?:[\w:~<>,*& ]+\([^()]*\)(?:\s*const)?\s+)?/g;
// The condition an ORT_ENFORCE found false, which follows the source location.
const CONDITION = /^.*? was false\.\s*/;
// Advice meant for the model's author, not for a client.
const ADVICE = /\s*Please fix either the inputs\/outputs or the model\.?/g;
const ADDRESS = /0x[0-9a-f]{6,}/gi;
const MAX_DETAIL = 400;

/**
 * The client's error for `err`, what ONNX Runtime threw for a run of one request's `feeds`, when
 * it is a verdict on those values; undefined when the failure is the server's. Its message names
 * the inputs (with their types and shapes) and says what the runtime found, without the
 * runtime's source paths, function names or addresses.
 */
export function inputFault(err: unknown, feeds: Readonly<Record<string, TensorValue>>): ClientError | undefined {
  if (!(err instanceof Error) || RESOURCE.test(err.message)) return undefined;
  const detail = runtimeVerdict(err.message);
  if (detail === undefined) return undefined;
  const inputs = Object.entries(feeds).map(([name, { type, shape }]) => `'${name}' (${type} ${formatShape(shape)})`);
  return new ClientError(`the model cannot run on input${inputs.length === 1 ? "" : "s"} ${inputs.join(", ")}: ${detail}`);
}

/** What the runtime's message says of the values, tidied; undefined when it is not such a verdict. */
export function runtimeVerdict(message: string): string | undefined {
  if (FEED_CHECK.test(message)) return tidy(message);
  let innermost: RegExpExecArray | undefined;
  for (const match of message.matchAll(OPERATOR)) innermost = match;
  if (innermost === undefined) return undefined;
  const [prefix, op, node] = innermost;
  let status = message.slice(innermost.index + prefix.length);
  const located = status.replace(SOURCE, "");
  if (located !== status) status = located.replace(CONDITION, "");
  return tidy(`${op} node '${node}': ${status}`);
}

function tidy(text: string): string {
  const clean = text.replace(SOURCE, "").replace(ADVICE, "").replace(ADDRESS, "").replace(/\s+/g, " ").trim();
  return clean.length > MAX_DETAIL ? `${clean.slice(0, MAX_DETAIL - 1)}…` : clean;
}
