/**
 * The server's limits on what one request may make a worker allocate, counted as its tensors are
 * read: every tensor's elements are taken from the request's budget before any array of them is
 * made, so a shape that claims a billion elements costs nothing.
 */
import { UNLIMITED, type RequestLimits } from "../limits.js";

/** What is left of one request's {@link RequestLimits}, all its tensors together. */
export class ElementBudget {
  #tensor: number;
  #bytes: number;

  constructor(readonly limits: RequestLimits = UNLIMITED) {
    this.#tensor = limits.maxTensorElements;
    this.#bytes = limits.maxBytesElements;
  }

  /**
   * Takes the `count` elements of one tensor (BYTES elements when `bytes`), or returns why they
   * exceed the request's limits, for the caller to wrap in its own error.
   */
  take(count: number, bytes = false): string | undefined {
    const { maxTensorElements, maxBytesElements } = this.limits;
    if (count > this.#tensor) return `the request would hold ${maxTensorElements - this.#tensor + count} tensor elements, more than the server's limit of ${maxTensorElements} (--max-tensor-elements)`;
    if (bytes && count > this.#bytes) return `the request would hold ${maxBytesElements - this.#bytes + count} BYTES elements, more than the server's limit of ${maxBytesElements} (--max-bytes-elements)`;
    this.#tensor -= count;
    if (bytes) this.#bytes -= count;
    return undefined;
  }
}
