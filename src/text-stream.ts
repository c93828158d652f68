/**
 * Text streamed as tokens come: each piece final, the pieces adding up to the whole text, never
 * half a character, and cut at the first stop string even when it spans several tokens.
 */

/** Turns tokens into text one token at a time, holding back bytes of a character not yet complete. */
export interface Detokenizer {
  /** The text that `token` completes; "" while a character is still partial. */
  push(token: number): string;
  /** The text still held back, at the end of a sequence. */
  flush(): string;
}

/**
 * Decodes a window of tokens: the text new since the last piece is the decoding of the window
 * minus the decoding of its start. Decoding a window rather than each token alone keeps what
 * tokenizers do across tokens (spaces, bytes of one character split over tokens); a piece that
 * ends in U+FFFD is a character still incomplete, and waits for the next token.
 */
export function incremental(decode: (tokens: number[]) => string): Detokenizer {
  const tokens: number[] = [];
  let prefix = 0;
  let read = 0;
  const take = (complete: boolean) => {
    const before = decode(tokens.slice(prefix, read));
    const after = decode(tokens.slice(prefix));
    if (!complete && (after.length <= before.length || after.endsWith("\uFFFD"))) return "";
    prefix = read;
    read = tokens.length;
    return after.slice(before.length);
  };
  return {
    push(token) {
      tokens.push(token);
      return take(false);
    },
    flush: () => take(true),
  };
}

/**
 * Cuts streamed text at the first of some stop strings. Text that may be the beginning of a stop
 * string is held back until the next pieces tell, so that no piece sent has to be taken back.
 */
export class StopStrings {
  #held = "";

  constructor(readonly stops: readonly string[]) {}

  /**
   * Takes the next piece of text; returns what may be sent now and whether a stop string was
   * found (the text then ends before it). `last`: no piece follows, nothing is held back.
   */
  push(piece: string, last: boolean): { text: string; stopped: boolean } {
    const pending = this.#held + piece;
    const hit = Math.min(...this.stops.map((stop) => pending.indexOf(stop)).filter((at) => at >= 0));
    if (Number.isFinite(hit)) return { text: pending.slice(0, hit), stopped: true };
    const hold = last ? 0 : Math.max(0, ...this.stops.map((stop) => overlap(pending, stop)));
    this.#held = pending.slice(pending.length - hold);
    return { text: pending.slice(0, pending.length - hold), stopped: false };
  }
}

/** The length of the longest end of `text` that is a beginning of `stop` (shorter than `stop`). */
function overlap(text: string, stop: string): number {
  for (let n = Math.min(text.length, stop.length - 1); n > 0; n--) if (text.endsWith(stop.slice(0, n))) return n;
  return 0;
}
