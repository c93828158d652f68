/**
 * The sampling decision, made once at the door before any span exists. The SDK's own samplers
 * decide inside `startSpan()`, after it has drawn ids, formatted them as hex and cleaned the
 * attributes: for a request it then drops, that is most of the cost of tracing at 1 %. Here a
 * request that is not sampled costs a few random numbers and one comparison, and nothing after the
 * door (no span, no queue or forward spans, no batch span) is done for it; the SDK, given the
 * trace ids chosen here, records every span it is asked for.
 *
 * The samplers are those `OTEL_TRACES_SAMPLER` names, with the SDK's meaning: a ratio keeps the
 * traces whose id, read as four 32-bit words XOR-ed together, lies below `ratio × (2³² − 1)`, so a
 * trace kept here is kept by any other OpenTelemetry JS service sampling at the same or a higher
 * ratio; `parentbased_*` follows the sampled flag of the client's `traceparent`.
 */

/** What the door knows of the client's span, from its `traceparent`. */
export interface ParentSpan {
  readonly traceId: string;
  /** W3C trace flags: bit 0 is "sampled". */
  readonly traceFlags: number;
}

/** The decision for one request. */
export interface DoorSampler {
  /** A new trace at this door: the id of the trace to record, or undefined to record nothing. */
  root(): string | undefined;
  /** A request in its client's trace: whether to record it. */
  child(parent: ParentSpan): boolean;
}

const WORD = 2 ** 32;

// One random 32-bit word (Math.random is the SDK's own source of ids, and costs nanoseconds).
const word = () => (Math.random() * WORD) >>> 0;
// A word as 8 hex digits, a byte at a time from a table: `toString(16)` of a number is a
// floating-point conversion, and was a quarter of the tracer's time at 100 % sampling.
const BYTE_HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));
const hex8 = (w: number) => BYTE_HEX[w >>> 24]! + BYTE_HEX[(w >>> 16) & 255]! + BYTE_HEX[(w >>> 8) & 255]! + BYTE_HEX[w & 255]!;

/** A random span id: 16 lowercase hex digits, never all zero. */
export function randomSpanId(): string {
  return hex8(word()) + hex8(word() || 1);
}

/** A random trace id: 32 lowercase hex digits, never all zero. */
export function randomTraceId(): string {
  return hex8(word()) + hex8(word()) + hex8(word()) + hex8(word() || 1);
}

/** The number a ratio sampler compares with its bound: a trace id's four 32-bit words, XOR-ed. */
export function traceIdWord(traceId: string): number {
  let x = 0;
  for (let i = 0; i < 32; i += 8) x ^= parseInt(traceId.slice(i, i + 8), 16);
  return x >>> 0;
}

/** The bound below which a trace id's word is kept at `ratio` (every trace at 1). */
function boundOf(ratio: number): number {
  return ratio >= 1 ? WORD : Math.floor(Math.max(0, ratio) * (WORD - 1));
}

const ALWAYS: DoorSampler = { root: randomTraceId, child: () => true };
const NEVER: DoorSampler = { root: () => undefined, child: () => false };

// A new trace kept at `ratio`: the words are drawn first and turned into an id only when kept.
function ratioSampler(ratio: number): DoorSampler {
  const bound = boundOf(ratio);
  if (bound === 0) return NEVER;
  if (bound === WORD) return ALWAYS;
  return {
    root() {
      const a = word();
      const b = word();
      const c = word();
      const d = word() || 1;
      return ((a ^ b ^ c ^ d) >>> 0) < bound ? hex8(a) + hex8(b) + hex8(c) + hex8(d) : undefined;
    },
    child: (parent) => traceIdWord(parent.traceId) < bound,
  };
}

/**
 * The sampler `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) names, with its argument
 * `OTEL_TRACES_SAMPLER_ARG` (a ratio from 0 to 1; 1 when missing or not one). An unknown name is
 * the default, as the SDK does.
 */
export function doorSampler(name = "parentbased_always_on", arg?: string): DoorSampler {
  const parsed = arg === undefined || arg.trim() === "" ? NaN : Number(arg);
  const ratio = Number.isFinite(parsed) && parsed >= 0 && parsed <= 1 ? parsed : 1;
  const parentBased = (root: DoorSampler): DoorSampler => ({ root: root.root, child: (parent) => (parent.traceFlags & 1) === 1 });
  switch (name.trim().toLowerCase()) {
    case "always_on":
      return ALWAYS;
    case "always_off":
      return NEVER;
    case "traceidratio":
      return ratioSampler(ratio);
    case "parentbased_always_off":
      return parentBased(NEVER);
    case "parentbased_traceidratio":
      return parentBased(ratioSampler(ratio));
    default:
      return parentBased(ALWAYS);
  }
}
