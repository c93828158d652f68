/** The bytes before a message in its gRPC frame: the compressed flag, then the length. */
export const PREFIX = 5;

/**
 * Where the messages of one gRPC request stream end: each is a {@link PREFIX}-byte prefix (a compressed flag
 * and a 4-byte big-endian length) followed by that many bytes.
 */
export class MessageFrames {
  #prefix = 0;
  #length = 0;
  #left = 0;

  /** Cuts `chunk` where messages end: each piece's size, and whether it ends its message. */
  split(chunk: Uint8Array): { bytes: number; ends: boolean }[] {
    const pieces: { bytes: number; ends: boolean }[] = [];
    let at = 0;
    while (at < chunk.length) {
      const start = at;
      let ends = false;
      while (this.#prefix < PREFIX && at < chunk.length) {
        // Byte 0 is the flag; bytes 1 to 4 the length (a product, not a shift: no sign bit).
        this.#length = this.#prefix === 0 ? 0 : this.#length * 256 + chunk[at]!;
        this.#prefix++;
        at++;
        if (this.#prefix === PREFIX) this.#left = this.#length;
      }
      if (this.#prefix === PREFIX) {
        const body = Math.min(this.#left, chunk.length - at);
        at += body;
        this.#left -= body;
        ends = this.#left === 0;
        if (ends) this.#prefix = 0;
      }
      pieces.push({ bytes: at - start, ends });
    }
    return pieces;
  }
}
